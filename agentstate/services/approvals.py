"""The review queue (docs/concepts.md): tool calls waiting for a person.

``request_approval`` files a call for review, once per ``(run, call_id)``;
when the run's approval records already decide the call, the request is
filed already decided. ``decide`` turns a pending request into approved or
rejected exactly once: it locks the request's row (``SELECT ... FOR UPDATE``
on PostgreSQL; SQLite's IMMEDIATE transactions serialize writers), checks
its status and age, writes the matching approval record through
``runs.record_decision`` (what ``runs.approve`` / ``runs.reject`` do) and
keeps who decided, when and why. The admin and the REST API both call it,
so two reviewers racing get one decision and one ``AlreadyDecided``.

A pending request older than ``AGENTSTATE["APPROVAL_TTL"]`` by the database
clock is expired whether or not the sweep (``services.sweep``) has marked it.
"""

from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Case, CharField, F, Q, QuerySet, Value, When
from django.db.models.functions import Now

from agentstate import events
from agentstate.conf import agentstate_settings
from agentstate.db import atomic_retry, prepared, returned, sql_of
from agentstate.exceptions import (
    AlreadyDecided,
    ApprovalRequestExpired,
    ApprovalRequestNotFound,
    BadInput,
)
from agentstate.models import ApprovalRequest, Run
from agentstate.services import runs
from agentstate.validation import check_json, check_key

Status = ApprovalRequest.Status
DECISIONS = {"approve": Status.APPROVED, "reject": Status.REJECTED}
DECIDED_BY_RECORDS = "Decided by the run's approval records."


def _expired_q() -> Q:
    return Q(status=Status.PENDING, created_at__lte=Now() - agentstate_settings.APPROVAL_TTL)


def with_current_status(requests: QuerySet) -> QuerySet:
    """Annotates ``current_status``: a pending request past ``APPROVAL_TTL`` reads ``expired``.

    By the database clock, so a listing agrees with what ``decide`` would say
    before the sweep has run.
    """
    return requests.annotate(current_status=_current_status())


def _current_status() -> Case:
    return Case(
        When(_expired_q(), then=Value(Status.EXPIRED)),
        default=F("status"),
        output_field=CharField(),
    )


def _locked(pk: Any) -> ApprovalRequest | None:
    """The request ``pk``, locked, with its ``current_status``; fixed SQL, as the ORM's
    query costs more to build than to run."""
    current_status, params = sql_of(_current_status(), ApprovalRequest)
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    rows = returned(
        ApprovalRequest,
        f"SELECT *, {current_status} AS current_status FROM {ApprovalRequest._meta.db_table}"
        f" WHERE id = %s{lock}",
        [*params, pk],
    )
    return rows[0] if rows else None


def in_status(status: str) -> Q:
    """The requests whose current status (see ``with_current_status``) is ``status``."""
    if status == Status.PENDING:
        return Q(status=Status.PENDING) & ~_expired_q()
    if status == Status.EXPIRED:
        return Q(status=Status.EXPIRED) | _expired_q()
    return Q(status=status)


def _details(request: ApprovalRequest, run: Run, **extra: Any) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "tool_name": request.tool_name,
        "call_id": request.call_id,
        **extra,
    }


@atomic_retry
def ensure_request(
    run: Run, tool_name: str, call_id: str, arguments: Any = None, *, user: Any = None
) -> tuple[ApprovalRequest, bool]:
    """The run's request for ``call_id`` and whether it was filed now.

    Idempotent per ``(run, call_id)``: an existing request is returned as it
    is. A new one is filed already approved or rejected (``decided_by``
    empty) when the run's records decide the call.
    """
    check_key(tool_name, "tool_name")
    check_key(call_id, "call_id")
    check_json(arguments, "arguments")
    # The run's lock orders this against approve, reject and rebuild, so the
    # records read below are the ones the new request is filed under.
    run = runs.lock_run(run)
    existing = ApprovalRequest.objects.filter(run=run, call_id=call_id).first()
    if existing is not None:
        return existing, False
    record = runs.records(run).get(tool_name)
    decided = runs.decide_from(record, call_id)
    fields: dict[str, Any] = {}
    if decided is not None:
        fields = {
            "status": Status.APPROVED if decided else Status.REJECTED,
            "always": record["approved"] is True or record["rejected"] is True,
            "decided_at": Now(),
            "reason": DECIDED_BY_RECORDS,
        }
    request = ApprovalRequest.objects.create(
        run=run,
        tool_name=tool_name,
        call_id=call_id,
        arguments=arguments,
        created_by=runs.real_user(user),
        **fields,
    )
    request.refresh_from_db(fields=["created_at", "decided_at"])
    events.record(
        "approval.requested",
        request,
        object_id=str(request.pk),
        user=user,
        details=_details(request, run, status=request.status),
    )
    return request, True


def _decided(request: ApprovalRequest) -> datetime:
    """Store the request's decision, decided now by the database clock; returns when."""
    columns, params = prepared(
        ApprovalRequest,
        {n: getattr(request, n) for n in ("status", "always", "decided_by_id", "reason")},
    )
    now, now_params = sql_of(Now(), ApprovalRequest)
    decided_at = ApprovalRequest._meta.get_field("decided_at").column
    (stored,) = returned(
        ApprovalRequest,
        f"UPDATE {ApprovalRequest._meta.db_table}"
        f" SET {', '.join(f'{c} = %s' for c in columns)}, {decided_at} = {now}"
        " WHERE id = %s RETURNING *",
        [*params, *now_params, request.pk],
    )
    return stored.decided_at


def request_approval(
    run: Run, tool_name: str, call_id: str, arguments: Any = None, *, user: Any = None
) -> ApprovalRequest:
    """File ``call_id`` of ``tool_name`` for review (see ``ensure_request``); returns the request."""
    return ensure_request(run, tool_name, call_id, arguments, user=user)[0]


@atomic_retry
def decide(
    request: ApprovalRequest | int,
    decision: str,
    always: bool = False,
    *,
    by: Any = None,
    reason: str = "",
) -> ApprovalRequest:
    """Approve or reject a pending request exactly once; returns it decided.

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
    locked = _locked(pk)
    if locked is None:
        raise ApprovalRequestNotFound(f"Approval request {pk} not found.")
    if locked.current_status == Status.EXPIRED:
        raise ApprovalRequestExpired()
    if locked.status != Status.PENDING:
        who = f" by {locked.decided_by.get_username()}" if locked.decided_by else ""
        raise AlreadyDecided(f"The approval request was already {locked.status}{who}.")
    locked.run = runs.record_decision(
        Run(pk=locked.run_id),
        locked.tool_name,
        locked.call_id,
        runs.APPROVE if decision == "approve" else runs.REJECT,
        always,
        by,
        reason,
    )
    locked.status = DECISIONS[decision]
    locked.always = always
    locked.decided_by = runs.real_user(by)
    locked.reason = reason
    locked.decided_at = _decided(locked)
    events.record(
        "approval.decided",
        locked,
        object_id=str(pk),
        user=by,
        details=_details(locked, locked.run, decision=decision, always=always, reason=reason),
    )
    return locked
