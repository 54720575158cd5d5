"""The review queue: tool calls waiting for a person.

``request_approval`` files a call for review, once per ``(run, call_id)``;
when the run's approval records already decide the call, the request is
filed already decided. ``decide`` turns a pending request into approved or
rejected exactly once, under the row locks of the run and of the request,
and writes the matching approval record as ``runs.approve`` /
``runs.reject`` do, keeping who decided, when and why. The admin and the
REST API both call it, so two reviewers racing get one decision and one
``AlreadyDecided``.

A pending request older than ``AGENTSTATE["APPROVAL_TTL"]`` by the database
clock is expired whether or not the sweep (``services.sweep``) has marked
it: ``decide`` refuses it and listings (``with_current_status``,
``in_status``) show it so.
"""

from typing import Any

from django.db.models import Q, QuerySet

from agentstate import events
from agentstate.backends import Actor, Reach, backend
from agentstate.conf import agentstate_settings
from agentstate.exceptions import ApprovalRequestNotFound, BadInput
from agentstate.models import ApprovalRequest, Run
from agentstate.querysets import current_status, past_ttl
from agentstate.records import DECIDED_BY_RECORDS
from agentstate.services import runs
from agentstate.validation import check_json, check_key

__all__ = [
    "DECIDED_BY_RECORDS",
    "DECISIONS",
    "decide",
    "ensure_request",
    "in_status",
    "request_approval",
    "with_current_status",
]

Status = ApprovalRequest.Status
DECISIONS = {"approve": Status.APPROVED, "reject": Status.REJECTED}
# The largest request id (a 64-bit key): a larger one names no request.
MAX_ID = 2**63 - 1


def with_current_status(requests: QuerySet[ApprovalRequest]) -> QuerySet[ApprovalRequest]:
    """Annotates ``current_status``: a pending request past ``APPROVAL_TTL`` reads ``expired``.

    By the database clock, so a listing agrees with what ``decide`` would say
    before the sweep has run.
    """
    return requests.annotate(current_status=current_status(agentstate_settings.APPROVAL_TTL))


def in_status(status: str) -> Q:
    """The requests whose current status (see ``with_current_status``) is ``status``."""
    expired = past_ttl(agentstate_settings.APPROVAL_TTL)
    if status == Status.PENDING:
        return Q(status=Status.PENDING) & ~expired
    if status == Status.EXPIRED:
        return Q(status=Status.EXPIRED) | expired
    return Q(status=status)


def ensure_request(
    run: runs.RunRef,
    tool_name: str,
    call_id: str,
    arguments: Any = None,
    *,
    user: Any = None,
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
        Actor.of(user),
    )
    request, created = changed.value
    events.announce(changed.events, ApprovalRequest, request)
    return request, created


def request_approval(
    run: runs.RunRef,
    tool_name: str,
    call_id: str,
    arguments: Any = None,
    *,
    user: Any = None,
    reach: Reach | None = None,
) -> ApprovalRequest:
    """File ``call_id`` of ``tool_name`` for review (see ``ensure_request``); returns the request."""
    return ensure_request(run, tool_name, call_id, arguments, user=user, reach=reach)[0]


def decide(
    request: ApprovalRequest | int,
    decision: str,
    always: bool = False,
    *,
    by: Any = None,
    reason: str = "",
) -> ApprovalRequest:
    """Approve or reject a pending request exactly once; returns it decided, with its
    ``run``, ``current_status`` and ``decided_by``.

    Refused with ``AlreadyDecided`` when it is approved or rejected already,
    ``ApprovalRequestExpired`` when it is expired or pending for longer than
    ``APPROVAL_TTL``. Writes the run's approval record (per call, or for
    every call with ``always``) in the same transaction.
    """
    if decision not in DECISIONS:
        raise BadInput("decision must be 'approve' or 'reject'.", field="decision")
    if not isinstance(always, bool):
        raise BadInput("always must be true or false.", field="always")
    reason = runs.check_reason(reason)
    pk = request.pk if isinstance(request, ApprovalRequest) else request
    if not 0 < pk <= MAX_ID:
        raise ApprovalRequestNotFound.of(id=pk)
    changed = backend().decide(
        pk, decision == "approve", always, reason, agentstate_settings.APPROVAL_TTL, Actor.of(by)
    )
    decided = changed.value
    decided.decided_by = runs.real_user(by)
    records_changed, request_decided = changed.events
    events.announce([records_changed], Run, decided.run)
    events.announce([request_decided], ApprovalRequest, decided)
    return decided
