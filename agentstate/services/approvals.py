"""The review queue: tool calls waiting for a person, and the policies that
spare them the asking.

``request_approval`` files a call for review, once per ``(run, call_id)``;
when the run's approval records already decide the call, or, leaving it
undecided, an active approval policy matches it (``agentstate.policies``),
the request is filed already decided. ``decide`` turns a pending request
into approved or rejected exactly once, under the row locks of the run and
of the request, and writes the matching approval record as ``runs.approve``
/ ``runs.reject`` do, keeping who decided, when and why, and what was
approved instead of the filed arguments, if anything. The admin and the
REST API both call it, so two reviewers racing get one decision and one
``AlreadyDecided``.

``create_policy`` and ``revoke_policy`` make and end standing decisions;
a revoked policy decides no request filed after the revocation returns.

A pending request older than ``AGENTSTATE["APPROVAL_TTL"]`` by the database
clock is expired whether or not the sweep (``services.sweep``) has marked
it: ``decide`` refuses it and listings (``with_current_status``,
``in_status``) show it so.
"""

from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet
from django.utils import timezone

from agentstate import events
from agentstate.backends import Page, backend
from agentstate.conf import agentstate_settings
from agentstate.exceptions import ApprovalRequestNotFound, BadInput, PolicyNotFound
from agentstate.models import ApprovalPolicy, ApprovalRequest, Event, Run, Vote
from agentstate.models.querysets import current_status, request_in_status
from agentstate.policies import DECIDED_BY_POLICY
from agentstate.policies import active as in_force
from agentstate.records import DECIDED_BY_RECORDS
from agentstate.services import runs, waiting
from agentstate.services.waiting import deadline_of
from agentstate.types import Reach
from agentstate.validation import check_json, check_key, check_run_id

from .acting import By, acting, takes_by

__all__ = [
    "DECIDED_BY_POLICY",
    "adecide",
    "approval_request",
    "arequest_approval",
    "await_decision",
    "await_run_decided",
    "DECIDED_BY_RECORDS",
    "DECISIONS",
    "create_policy",
    "deadline_of",
    "decidable_by",
    "decide",
    "ensure_request",
    "in_status",
    "policies",
    "request_approval",
    "requests_page",
    "revoke_policy",
    "votes_of",
    "wait",
    "wait_run_decided",
    "with_current_status",
]

Status = ApprovalRequest.Status
Decision = ApprovalPolicy.Decision
DECISIONS = {Decision.APPROVE: Status.APPROVED, Decision.REJECT: Status.REJECTED}
# The largest request id (a 64-bit key): a larger one names no request.
MAX_ID = 2**63 - 1


def with_current_status(requests: QuerySet[ApprovalRequest]) -> QuerySet[ApprovalRequest]:
    """Annotates ``current_status``: a pending request past ``APPROVAL_TTL`` reads ``expired``.

    By the database clock, so a listing agrees with what ``decide`` would say
    before the sweep has run.
    """
    return requests.annotate(current_status=current_status(agentstate_settings.APPROVAL_TTL))


def votes_of(request: ApprovalRequest) -> list[Vote]:
    """The request's votes in order, with who cast them (none when filed under no
    rule: no query then); prefetched ones (``votes__by``) are taken as they are."""
    if request.rule_id is None:
        return []
    prefetched = getattr(request, "_prefetched_objects_cache", {}).get("votes")
    if prefetched is not None:
        return list(prefetched)
    return list(request.votes.select_related("by").order_by("at", "pk"))


def decidable_by(user: Any) -> QuerySet[ApprovalRequest]:
    """The requests ``user`` may decide by their rules (reviewers, escalation, no
    self-approval); none for a user without ``decide_approvalrequest``."""
    if not getattr(user, "is_authenticated", False) or not user.has_perm(
        "agentstate.decide_approvalrequest"
    ):
        return ApprovalRequest.objects.none()
    return ApprovalRequest.objects.decidable_by(user)


def in_status(status: str) -> Q:
    """The requests whose current status (see ``with_current_status``) is ``status``."""
    return request_in_status(status, agentstate_settings.APPROVAL_TTL)


def approval_request(request_id: int, *, reach: Reach | None = None) -> ApprovalRequest | None:
    """The request with its ``run``, ``decided_by`` and ``current_status`` (see
    ``with_current_status``); ``None`` when there is none, or none in ``reach``
    (the requests its user filed; ``None``: every request)."""
    if not 0 < request_id <= MAX_ID:
        return None
    return backend().approval_request(request_id, agentstate_settings.APPROVAL_TTL, reach)


# What a listing of approval requests filters by (``requests_page``).
FILTERS = ("status", "tool_name", "run_id")


def requests_page(
    *, reach: Reach | None = None, offset: int = 0, limit: int, **filters: str
) -> Page[ApprovalRequest]:
    """A page of approval requests, oldest first: ``limit`` of them from ``offset``,
    each with its ``run``, ``decided_by``, ``current_status`` (see
    ``with_current_status``) and votes (``votes_of``), and how many match in all.

    ``filters`` (each optional): ``status`` (the current status, see
    ``in_status``), ``tool_name`` and ``run_id`` (equal); ``reach``: only the
    requests its user filed (``None``: every request).
    """
    for name, value in filters.items():
        if name not in FILTERS:
            raise BadInput(f"{name}: no such filter of approval requests.", field=name)
        if name == "run_id":
            check_run_id(value)
        else:
            check_key(value, name)
    if filters.get("status", Status.PENDING) not in Status.values:
        raise BadInput(f"status: must be one of: {', '.join(Status.values)}.", field="status")
    if offset < 0 or limit < 1:
        raise BadInput("offset must be 0 or more and limit 1 or more.", field="limit")
    return backend().approval_requests_page(
        filters, agentstate_settings.APPROVAL_TTL, reach, offset, limit
    )


@takes_by("user")
def ensure_request(
    run: runs.RunRef,
    tool_name: str,
    call_id: str,
    arguments: Any = None,
    *,
    by: By = None,
    reach: Reach | None = None,
) -> tuple[ApprovalRequest, bool]:
    """The run's request for ``call_id`` and whether it was filed now.

    Idempotent per ``(run, call_id)``: an existing request is returned as it
    is. A new one is filed already approved or rejected (``decided_by``
    empty, reason ``DECIDED_BY_RECORDS``) when the run's records decide the
    call. The request comes with its ``run`` and ``current_status``.
    """
    check_key(tool_name, "tool_name")
    check_key(call_id, "call_id")
    check_json(arguments, "arguments")
    changed = backend().request_approval(
        runs.run_id_of(run),
        tool_name,
        call_id,
        arguments,
        agentstate_settings.APPROVAL_TTL,
        reach,
        acting(by),
    )
    request, created = changed.value
    _announce(changed.events, request)
    return request, created


def _announce(written: list[Event], request: ApprovalRequest) -> None:
    """The events of a change of ``request``: its own, and its run's record's."""
    records = [event for event in written if event.object_type == "run"]
    events.announce([e for e in written if e.object_type != "run"], ApprovalRequest, request)
    events.announce(records, Run, request.run)


@takes_by("user")
def request_approval(
    run: runs.RunRef,
    tool_name: str,
    call_id: str,
    arguments: Any = None,
    *,
    by: By = None,
    reach: Reach | None = None,
) -> ApprovalRequest:
    """File ``call_id`` of ``tool_name`` for review (see ``ensure_request``); returns the request.

    Filed already decided when the run's records decide the call or, leaving it
    undecided, an active policy matching it does: then ``policy`` names it,
    ``decided_by`` is empty, and the run's record of the call is written, so that
    ``runs.is_tool_approved`` agrees from the records."""
    return ensure_request(run, tool_name, call_id, arguments, by=by, reach=reach)[0]


def decide(
    request: ApprovalRequest | int,
    decision: str,
    always: bool = False,
    *,
    by: By = None,
    reason: str = "",
    arguments: Any = None,
) -> ApprovalRequest:
    """Approve or reject a pending request exactly once; returns it decided, with its
    ``run``, ``current_status`` and ``decided_by``.

    ``arguments``, approving only: what to run instead of the filed arguments, kept
    as ``approved_arguments`` when it differs from them (``None`` or the filed
    arguments: no edit). Refused with ``AlreadyDecided`` when it is approved or
    rejected already, ``ApprovalRequestExpired`` when it is expired or pending for
    longer than ``APPROVAL_TTL`` (or past its rule's deadline, decided by the sweep or
    not). Writes the run's approval record (per call, or for every call with
    ``always``) in the same transaction.

    Under the request's rule (copied when it was filed): ``SelfApproval`` for the
    run's creator unless the rule allows it, ``NotAReviewer`` outside its reviewers
    (and its escalation group once due); each decision is a vote, ``AlreadyVoted``
    for a second one; an approve leaves the request pending until
    ``approvals_required`` reviewers approved the same arguments (an edit starts
    the count for the edited ones), a reject decides at once.
    """
    if decision not in DECISIONS:
        raise BadInput("decision must be 'approve' or 'reject'.", field="decision")
    if not isinstance(always, bool):
        raise BadInput("always must be true or false.", field="always")
    reason = runs.check_reason(reason)
    if arguments is not None and decision != Decision.APPROVE:
        raise BadInput("arguments can be edited only when approving.", field="arguments")
    check_json(arguments, "arguments", agentstate_settings.MAX_JSON_DEPTH)
    pk = request.pk if isinstance(request, ApprovalRequest) else request
    if not 0 < pk <= MAX_ID:
        raise ApprovalRequestNotFound.of(id=pk)
    changed = backend().decide(
        pk,
        decision == Decision.APPROVE,
        always,
        reason,
        arguments,
        agentstate_settings.APPROVAL_TTL,
        acting(by),
    )
    decided = changed.value
    decided.decided_by = runs.real_user(by) if decided.decided_by_id is not None else None
    # The run's record first, then the request's own (its vote, its decision).
    events.announce([e for e in changed.events if e.object_type == "run"], Run, decided.run)
    events.announce([e for e in changed.events if e.object_type != "run"], ApprovalRequest, decided)
    return decided


# Waiting for a decision (services.waiting): no thread and no connection held
# while waiting, woken by the process's listener (LISTEN/NOTIFY on PostgreSQL).


def _reviewed() -> QuerySet[ApprovalRequest]:
    return with_current_status(ApprovalRequest.objects.select_related("run", "decided_by"))


async def await_decision(request: ApprovalRequest | int, timeout: float) -> ApprovalRequest:
    """The request once it is decided or expired (at once if it is), or as it stands
    (``pending``) after ``timeout`` seconds. Reads on the waiters' connection: what
    the caller's own open transaction wrote is not seen."""
    pk = request.pk if isinstance(request, ApprovalRequest) else request
    timeout = waiting.check_timeout(timeout)
    if not isinstance(pk, int) or not 0 < pk <= MAX_ID:
        raise ApprovalRequestNotFound.of(id=pk)
    found: ApprovalRequest | None = await waiting.until(
        waiting.request_check(_reviewed(), pk),
        waiting.request_notice(pk),
        timeout,
        key=("request", None, pk),
    )
    if found is None:
        raise ApprovalRequestNotFound.of(id=pk)
    return found


def wait(request: ApprovalRequest | int, timeout: float) -> ApprovalRequest:
    """``await_decision`` for sync code (not on a thread that runs an event loop);
    blocks the calling thread."""
    return async_to_sync(await_decision)(request, timeout)


async def await_run_decided(run: runs.RunRef, timeout: float) -> list[ApprovalRequest]:
    """The run's requests, oldest first, once none is pending (decided or expired), or
    as they stand after ``timeout`` seconds."""
    run_id = runs.run_id_of(run)
    return await waiting.until(
        waiting.requests_check(_reviewed(), run_id),
        waiting.run_notice(run_id),
        waiting.check_timeout(timeout),
        key=("run-requests", run_id),
    )


def wait_run_decided(run: runs.RunRef, timeout: float) -> list[ApprovalRequest]:
    """``await_run_decided`` for sync code."""
    return async_to_sync(await_run_decided)(run, timeout)


# Approval policies.


def _policy_user(user: Any) -> int | str | None:
    """A policy's user as the backend takes it: a user's id, a username as given
    (looked up by the backend), or ``None`` for every user."""
    if user is None or isinstance(user, str):
        return user
    if isinstance(user, get_user_model()) and user.pk is not None:
        return int(user.pk)
    raise BadInput("user must be a user, a username or None.", field="user")


MAX_LIFETIME = timedelta(days=1_000_000)  # a policy's timedelta, either way


def _expiry(expires_at: object) -> datetime | timedelta | None:
    """A policy's end as given, a time or a ``timedelta``: the backend takes it from
    the database's now, by which a policy is in force, and refuses it unless it is
    ahead (``PastExpiry``)."""
    if expires_at is None or (isinstance(expires_at, datetime) and timezone.is_aware(expires_at)):
        return expires_at
    if not isinstance(expires_at, timedelta):
        raise BadInput(
            "expires_at must be a time with its time zone, or a timedelta from now.",
            field="expires_at",
        )
    if abs(expires_at) > MAX_LIFETIME:  # an end any database's times can hold
        raise BadInput(
            f"expires_at must be within {MAX_LIFETIME.days:,} days of now.", field="expires_at"
        )
    return expires_at


def create_policy(
    tool_name: str,
    decision: str,
    *,
    user: Any = None,
    arguments: dict[str, Any] | None = None,
    expires_at: datetime | timedelta | None = None,
    reason: str = "",
    by: By = None,
) -> ApprovalPolicy:
    """A standing decision of later calls of ``tool_name``: ``decision`` (``"approve"``
    or ``"reject"``) for the runs ``user`` created (a user or a username; ``None``:
    every user's), for the calls whose arguments contain ``arguments`` (a JSON
    object; ``None``: any), until ``expires_at`` (a time, or a ``timedelta`` from now;
    ``None``: until revoked). ``by`` created it. Returns the policy, with
    ``user_name`` and ``created_by_name``. An unknown username is ``UnknownOwner`` on
    field ``user``.

    For a tool under an approval rule, ``by`` must be one of its reviewers
    (``NotAReviewer``), an approve policy needs a rule that wants one approval
    (``VotesRequired``), and a policy for ``by``'s own runs one that allows
    self-approval (``SelfApproval``). Filing, a policy decides only what the rule
    as it stands lets it: no approval once the rule wants several, nothing in its
    own maker's runs where self-approval is refused.
    """
    check_key(tool_name, "tool_name")
    if decision not in DECISIONS:
        raise BadInput("decision must be 'approve' or 'reject'.", field="decision")
    if arguments is not None and not isinstance(arguments, dict):
        raise BadInput("arguments must be a JSON object or null.", field="arguments")
    check_json(arguments, "arguments", agentstate_settings.MAX_JSON_DEPTH)
    if isinstance(user, str):
        check_key(user, "user")
    changed = backend().create_policy(
        tool_name,
        decision == Decision.APPROVE,
        _policy_user(user),
        arguments,
        _expiry(expires_at),
        runs.check_reason(reason),
        acting(by),
    )
    events.announce(changed.events, ApprovalPolicy, changed.value)
    return changed.value


def revoke_policy(policy: ApprovalPolicy | int, *, by: By = None) -> ApprovalPolicy:
    """End a policy now: it decides no request filed after this returns, and every
    request it decided was decided before its ``revoked_at``. ``PolicyNotFound``,
    ``AlreadyRevoked``. Returns the policy, with ``user_name`` and ``created_by_name``."""
    pk = policy.pk if isinstance(policy, ApprovalPolicy) else policy
    if isinstance(pk, bool) or not isinstance(pk, int) or not 0 < pk <= MAX_ID:
        raise PolicyNotFound.of(policy_id=pk)
    changed = backend().revoke_policy(pk, acting(by))
    events.announce(changed.events, ApprovalPolicy, changed.value)
    return changed.value


def policies(
    *, tool_name: str | None = None, user: Any = None, active: bool | None = None
) -> QuerySet[ApprovalPolicy]:
    """The policies, newest first, by ``tool_name``, by ``user`` (a user or a
    username), and in force now (``active=True``: neither revoked nor expired, by
    the database clock) or not (``False``)."""
    rows = ApprovalPolicy.objects.all()
    if tool_name is not None:
        rows = rows.filter(tool_name=tool_name)
    if user is not None:
        rows = rows.of_user(user)
    if active is not None:
        rows = rows.filter(in_force()) if active else rows.exclude(in_force())
    return rows


# The async forms, for async callers (agent frameworks): each runs its function in
# Django's thread for the database, so the event loop never waits on it.
arequest_approval = sync_to_async(request_approval)
adecide = sync_to_async(decide)
