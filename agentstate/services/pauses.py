"""Paused runs (docs/concepts.md#paused-runs): put, claim exactly once, resolve, cancel.

After the axelor ``FormStateStore``: a run stopped inside one tool call waits,
keyed by ``(chat_id, tool_call_id)``, for its owner to answer one question.
Every operation locks the pause's row (``SELECT ... FOR UPDATE`` on
PostgreSQL; SQLite's IMMEDIATE transactions serialize writers) and then
checks its status, so of any number of concurrent claims exactly one wins.
Expiry is judged by the database clock (``Now()``) at claim time, whatever
the sweeper (``agentstate.services.sweep``) has done so far.

``put`` and ``claim`` return what docs/python-api.md says (the question id, the payload);
``put_pause`` and ``claim_pause`` return the row for callers that show it.
Refusals are the exceptions of ``agentstate.exceptions``.
"""

import uuid
from datetime import timedelta
from typing import Any

from django.db import connection
from django.db.models import Case, CharField, DateTimeField, F, Q, QuerySet, Value, When
from django.db.models.expressions import ExpressionWrapper
from django.db.models.functions import Now

from agentstate import events
from agentstate.conf import agentstate_settings
from agentstate.db import atomic_retry, prepared, returned, sql_of
from agentstate.exceptions import (
    AlreadyClaimed,
    AlreadyResolved,
    BadInput,
    NotClaimed,
    NotPending,
    PauseExpired,
    PauseNotFound,
    QuestionSuperseded,
)
from agentstate.models import PausedRun
from agentstate.validation import check_json, check_key

Status = PausedRun.Status


OBJECT_ID_SEPARATOR = "#"
_NO_EVENT = object()


def object_id(chat_id: str, tool_call_id: str) -> str:
    """How events name a pause: ``chat_id#tool_call_id``."""
    return f"{chat_id}{OBJECT_ID_SEPARATOR}{tool_call_id}"


def _ttl(ttl: timedelta | int | float | None) -> timedelta:
    if ttl is None:
        return agentstate_settings.PAUSE_TTL
    if isinstance(ttl, int | float) and not isinstance(ttl, bool):
        ttl = timedelta(seconds=ttl)
    if not isinstance(ttl, timedelta) or ttl <= timedelta(0):
        raise BadInput("ttl must be a positive duration (a timedelta or seconds).", field="ttl")
    return ttl


def _expiry(ttl: timedelta) -> ExpressionWrapper:
    """``ttl`` from now by the database clock."""
    return ExpressionWrapper(Now() + Value(ttl), output_field=DateTimeField())


def _check_keys(chat_id: str, tool_call_id: str) -> None:
    check_key(chat_id, "chat_id")
    check_key(tool_call_id, "tool_call_id")


def _locked(chat_id: str, tool_call_id: str, among: QuerySet | None = None) -> PausedRun:
    """The pause's row, locked; one outside ``among`` is not found."""
    rows = PausedRun.objects.all() if among is None else among
    pause = (
        rows.select_for_update(of=("self",))
        .filter(chat_id=chat_id, tool_call_id=tool_call_id)
        .first()
    )
    if pause is None:
        raise PauseNotFound(f"No pause for chat {chat_id!r}, tool call {tool_call_id!r}.")
    return pause


def _is_question(given: str | uuid.UUID, current: uuid.UUID) -> bool:
    """Whether ``given`` names ``current``; text that is no UUID names none."""
    try:
        return uuid.UUID(str(given)) == current
    except ValueError:
        return False


def with_current_status(pauses: QuerySet) -> QuerySet:
    """Annotates ``current_status``: a pending pause past its expiry reads ``expired``.

    By the database clock, so a listing agrees with what a claim would say
    before the sweeper has run.
    """
    return pauses.annotate(
        current_status=Case(
            When(status=Status.PENDING, expires_at__lte=Now(), then=Value(Status.EXPIRED)),
            default=F("status"),
            output_field=CharField(),
        )
    )


def in_status(status: str) -> Q:
    """The pauses whose current status (see ``with_current_status``) is ``status``.

    Written on the stored columns, so the (status, expires_at) index serves it.
    """
    if status == Status.PENDING:
        return Q(status=Status.PENDING, expires_at__gt=Now())
    if status == Status.EXPIRED:
        return Q(status=Status.EXPIRED) | Q(status=Status.PENDING, expires_at__lte=Now())
    return Q(status=status)


def put_pause(
    chat_id: str,
    tool_call_id: str,
    owner: str,
    payload: Any,
    ttl: timedelta | int | float | None = None,
    *,
    user: Any = None,
    actor: str = "",
    among: QuerySet | None = None,
) -> PausedRun:
    """Keep a run pending for ``owner`` under a new question; returns the pause.

    Replaces any earlier pause of the call whatever its status (its question
    becomes stale), with a fresh expiry ``ttl`` from now by the database
    clock. ``among``: the pauses the caller may change; replacing any other
    is refused as not found and changes nothing.
    """
    _check_keys(chat_id, tool_call_id)
    check_key(owner, "owner")
    check_json(payload, "payload")
    ttl = _ttl(ttl)
    fields = {
        "chat_id": chat_id,
        "tool_call_id": tool_call_id,
        "owner": owner,
        "created_by_id": user.pk if getattr(user, "is_authenticated", False) else None,
        "question_id": uuid.uuid4(),
        "status": Status.PENDING,
        "payload": payload,
        "claimed_at": None,
        "claimed_by": "",
        "resolved_at": None,
    }
    event = {
        "object_id": object_id(chat_id, tool_call_id),
        "user": user,
        "actor": actor,
        "owner": owner,
        "details": {"question_id": str(fields["question_id"])},
    }
    if among is None and connection.vendor == "postgresql":
        pause = _put_in_one_statement(fields, ttl, event)
        if pause is not None:
            return pause
    return _put_locked(fields, ttl, event, among)


def _put_in_one_statement(
    fields: dict[str, Any], ttl: timedelta, event: dict[str, Any]
) -> PausedRun | None:
    """The put, its event included, as one PostgreSQL statement; ``None`` when a
    concurrent first put of the same call made the row meanwhile (nothing written).

    An upsert whose ``earlier`` lock (``SELECT ... FOR UPDATE``: the row's status
    as it is, not as the statement's snapshot saw it) names the status replaced.
    """
    columns, values, params = _row_values(fields, ttl)
    table = PausedRun._meta.db_table
    keys = ("chat_id", "tool_call_id")
    statement = (
        f"WITH earlier AS (SELECT status FROM {table} WHERE chat_id = %s AND tool_call_id = %s"
        f" FOR UPDATE) INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(values)})"
        f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET"
        f" {', '.join(f'{c} = excluded.{c}' for c in columns if c not in keys)}"
        " WHERE EXISTS (SELECT FROM earlier) RETURNING *, (SELECT status FROM earlier) AS replaced"
    )
    return events.change_and_record(
        PausedRun,
        statement,
        [fields["chat_id"], fields["tool_call_id"], *params],
        "pause.created",
        row_details=("expires_at", "replaced"),
        **event,
    )


@atomic_retry
def _put_locked(
    fields: dict[str, Any], ttl: timedelta, event: dict[str, Any], among: QuerySet | None
) -> PausedRun:
    chat_id, tool_call_id = fields["chat_id"], fields["tool_call_id"]
    earlier = (
        PausedRun.objects.select_for_update()
        .filter(chat_id=chat_id, tool_call_id=tool_call_id)
        .values_list("pk", "status")
        .first()
    )
    if earlier is None:
        # A concurrent first put meets the unique constraint; atomic_retry
        # runs this again, which then finds and locks the winner's row.
        pause = _written(fields, ttl)
    else:
        pk = earlier[0]
        if among is not None and not among.filter(pk=pk).exists():
            raise PauseNotFound(f"No pause for chat {chat_id!r}, tool call {tool_call_id!r}.")
        pause = _written(fields, ttl, pk)
    details = {**event["details"], "expires_at": events.json_time(pause.expires_at)}
    if earlier is not None:
        details["replaced"] = earlier[1]
    events.record("pause.created", pause, **{**event, "details": details})
    return pause


def _row_values(fields: dict[str, Any], ttl: timedelta) -> tuple[list[str], list[str], list[Any]]:
    """The columns of a pause written with ``fields``, created now and expiring ``ttl``
    from now by the database clock: the column names, their SQL values, the params."""
    now, now_params = sql_of(Now(), PausedRun)
    expiry, expiry_params = sql_of(_expiry(ttl), PausedRun)
    columns, params = prepared(PausedRun, fields)
    values = ["%s"] * len(fields) + [now, expiry]
    return [*columns, "created_at", "expires_at"], values, [*params, *now_params, *expiry_params]


def _written(fields: dict[str, Any], ttl: timedelta, pk: int | None = None) -> PausedRun:
    """Insert a pause (``pk`` None) or overwrite pause ``pk`` with ``fields`` (see
    ``_row_values``): one statement returning the row."""
    columns, values, params = _row_values(fields, ttl)
    table = PausedRun._meta.db_table
    if pk is None:
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(values)}) RETURNING *"
    else:
        assignments = ", ".join(f"{c} = {v}" for c, v in zip(columns, values, strict=True))
        sql = f"UPDATE {table} SET {assignments} WHERE id = %s RETURNING *"
        params = [*params, pk]
    (pause,) = returned(PausedRun, sql, params)
    return pause


def put(
    chat_id: str,
    tool_call_id: str,
    owner: str,
    payload: Any,
    ttl: timedelta | int | float | None = None,
    *,
    user: Any = None,
    actor: str = "",
) -> str:
    """Keep a run pending for ``owner``; returns the id of the question it waits on."""
    return str(
        put_pause(chat_id, tool_call_id, owner, payload, ttl, user=user, actor=actor).question_id
    )


def claim_pause(
    chat_id: str,
    tool_call_id: str,
    owner: str,
    question_id: str | uuid.UUID,
    *,
    user: Any = None,
    actor: str = "",
) -> PausedRun:
    """Claim the pause to carry its run on: exactly once, only by its owner.

    Refusals, the first that applies: ``PauseNotFound`` (also another
    owner's), ``QuestionSuperseded``, ``AlreadyClaimed``, ``AlreadyResolved``,
    ``PauseExpired`` (by the database clock, swept or not).
    """
    _check_keys(chat_id, tool_call_id)
    check_key(owner, "owner")
    claimer = events.actor_name(user, actor) or owner
    if connection.vendor == "postgresql":
        # the claim and its event in one statement: no transaction to open
        claimed = _claim_if_claimable(
            chat_id, tool_call_id, owner, question_id, claimer, event_of=user
        )
        if claimed is not None:
            return claimed
    return _claim_or_refuse(chat_id, tool_call_id, owner, question_id, claimer, user)


@atomic_retry
def _claim_or_refuse(
    chat_id: str,
    tool_call_id: str,
    owner: str,
    question_id: str | uuid.UUID,
    claimer: str,
    user: Any,
) -> PausedRun:
    pause = _claim_if_claimable(chat_id, tool_call_id, owner, question_id, claimer)
    if pause is None:  # find out why, under the row's lock
        pause = _locked(chat_id, tool_call_id)
        if pause.owner != owner:
            raise PauseNotFound(f"No pause for chat {chat_id!r}, tool call {tool_call_id!r}.")
        if not _is_question(question_id, pause.question_id):
            raise QuestionSuperseded("The pause now waits on another question.")
        if pause.status == Status.CLAIMED:
            raise AlreadyClaimed()
        if pause.status == Status.RESOLVED:
            raise AlreadyResolved()
        claimed = PausedRun.objects.filter(
            pk=pause.pk, status=Status.PENDING, expires_at__gt=Now()
        ).update(status=Status.CLAIMED, claimed_at=Now(), claimed_by=claimer)
        if not claimed:
            raise PauseExpired()
        pause.refresh_from_db(fields=["status", "claimed_at", "claimed_by"])
    events.record("pause.claimed", pause, **_claim_event(pause, user, claimer))
    return pause


def _claim_event(pause: PausedRun, user: Any, claimer: str) -> dict[str, Any]:
    return {
        "object_id": object_id(pause.chat_id, pause.tool_call_id),
        "user": user,
        "actor": claimer,
        "owner": pause.owner,
        "details": {"question_id": str(pause.question_id)},
    }


def _claim_if_claimable(
    chat_id: str,
    tool_call_id: str,
    owner: str,
    question_id: str | uuid.UUID,
    claimer: str,
    event_of: Any = _NO_EVENT,
) -> PausedRun | None:
    """The common claim in one ``UPDATE ... RETURNING``: the pause claimed, or ``None``
    when it is not the owner's pending, unexpired pause waiting on ``question_id``.
    Given ``event_of`` (the claiming user, or ``None``), PostgreSQL only: the
    statement also writes the claim's event.

    Concurrent claimers queue on the row's lock; the first changes the status,
    so under READ COMMITTED (or SQLite's serialized writers) the others' WHERE
    no longer matches and they fall back to ``claim_pause``'s refusals.
    """
    try:
        question = uuid.UUID(str(question_id))
    except ValueError:
        return None
    now, now_params = sql_of(Now(), PausedRun)
    field = PausedRun._meta.get_field
    statement = (
        f"UPDATE {PausedRun._meta.db_table} SET status = %s, claimed_at = {now}, claimed_by = %s"
        " WHERE chat_id = %s AND tool_call_id = %s AND owner = %s AND question_id = %s"
        f" AND status = %s AND expires_at > {now} RETURNING *"
    )
    params = [
        Status.CLAIMED,
        *now_params,
        claimer,
        chat_id,
        tool_call_id,
        owner,
        field("question_id").get_db_prep_value(question, connection),
        Status.PENDING,
        *now_params,
    ]
    if event_of is _NO_EVENT:
        return next(iter(returned(PausedRun, statement, params)), None)
    expected = PausedRun(
        chat_id=chat_id, tool_call_id=tool_call_id, owner=owner, question_id=question
    )
    return events.change_and_record(
        PausedRun,
        statement,
        params,
        "pause.claimed",
        **_claim_event(expected, event_of, claimer),
    )


def claim(
    chat_id: str,
    tool_call_id: str,
    owner: str,
    question_id: str | uuid.UUID,
    *,
    user: Any = None,
    actor: str = "",
) -> Any:
    """Claim the pause (see ``claim_pause``); returns its payload."""
    return claim_pause(chat_id, tool_call_id, owner, question_id, user=user, actor=actor).payload


@atomic_retry
def resolve(
    chat_id: str,
    tool_call_id: str,
    *,
    user: Any = None,
    actor: str = "",
    among: QuerySet | None = None,
) -> PausedRun:
    """Mark a claimed pause done with, so it can never be carried on again.

    Any other status: ``NotClaimed``. ``among``: the pauses the caller may
    change (others are not found).
    """
    _check_keys(chat_id, tool_call_id)
    pause = _locked(chat_id, tool_call_id, among)
    if pause.status != Status.CLAIMED:
        raise NotClaimed(f"The pause is {pause.status}, not claimed.")
    PausedRun.objects.filter(pk=pause.pk).update(status=Status.RESOLVED, resolved_at=Now())
    pause.refresh_from_db(fields=["status", "resolved_at"])
    events.record(
        "pause.resolved",
        pause,
        object_id=object_id(chat_id, tool_call_id),
        user=user,
        actor=actor,
        owner=pause.owner,
        details={"question_id": str(pause.question_id)},
    )
    return pause


@atomic_retry
def cancel(
    chat_id: str,
    tool_call_id: str,
    *,
    user: Any = None,
    actor: str = "",
    among: QuerySet | None = None,
) -> PausedRun:
    """Remove a pending pause; returns it as it was.

    Any other status, and a pending pause already past its expiry by the
    database clock (it is expired, swept or not): ``NotPending``.
    """
    _check_keys(chat_id, tool_call_id)
    pause = _locked(chat_id, tool_call_id, among)
    removed, _ = PausedRun.objects.filter(
        pk=pause.pk, status=Status.PENDING, expires_at__gt=Now()
    ).delete()
    if not removed:
        status = Status.EXPIRED if pause.status == Status.PENDING else pause.status
        raise NotPending(f"The pause is {status}, not pending.")
    events.record(
        "pause.cancelled",
        pause,
        object_id=object_id(chat_id, tool_call_id),
        user=user,
        actor=actor,
        owner=pause.owner,
        details={"question_id": str(pause.question_id)},
    )
    return pause
