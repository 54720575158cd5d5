"""Paused runs: put, claim exactly once, resolve, cancel.

After the axelor ``FormStateStore``: a run stopped inside one tool call waits,
keyed by ``(chat_id, tool_call_id)``, for its owner to answer one question.
The functions check their arguments and leave each operation, its event
included, to the database's backend (``agentstate.backends``), which locks
the pause's row and then checks its status, so of any number of concurrent
claims exactly one wins. Expiry is judged by the database clock at claim
time, whatever the sweeper (``agentstate.services.sweep``) has done so far.

``put`` and ``claim`` return the question id and the payload; ``put_pause``
and ``claim_pause`` return the row for callers that show it. Refusals are
the exceptions of ``agentstate.exceptions``. ``reach`` (a
``agentstate.backends.Reach``, or ``None`` for every pause) is whose pauses
a REST caller may replace, resolve or cancel; any other answers not found.
"""

import dataclasses
import uuid
from datetime import timedelta
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.db.models import Q, QuerySet

from agentstate import events
from agentstate.backends import Changed, Page, backend
from agentstate.conf import agentstate_settings
from agentstate.exceptions import BadInput
from agentstate.models import PausedRun
from agentstate.models.querysets import PausedRunQuerySet, pause_in_status
from agentstate.types import Reach
from agentstate.validation import check_json, check_key

from .acting import By, acting, takes_by

Status = PausedRun.Status

OBJECT_ID_SEPARATOR = PausedRun.OBJECT_ID_SEPARATOR
object_id = PausedRun.object_id


def _ttl(ttl: timedelta | int | float | None) -> timedelta:
    if ttl is None:
        return agentstate_settings.PAUSE_TTL
    if isinstance(ttl, int | float) and not isinstance(ttl, bool):
        ttl = timedelta(seconds=ttl)
    if not isinstance(ttl, timedelta) or ttl <= timedelta(0):
        raise BadInput("ttl must be a positive duration (a timedelta or seconds).", field="ttl")
    return ttl


def _check_keys(chat_id: str, tool_call_id: str) -> None:
    check_key(chat_id, "chat_id")
    check_key(tool_call_id, "tool_call_id")


def _question(question_id: str | uuid.UUID) -> str:
    """The canonical text of the question ``question_id`` names, in any spelling of a
    UUID; ``""`` (no question) for anything else, which a claim finds superseded."""
    try:
        return str(uuid.UUID(str(question_id)))
    except ValueError:
        return ""


def _announced(changed: Changed[PausedRun]) -> PausedRun:
    events.announce(changed.events, PausedRun, changed.value)
    return changed.value


def with_current_status(pauses: QuerySet[PausedRun]) -> QuerySet[PausedRun]:
    """Annotates ``current_status``: a pending pause past its expiry reads ``expired``.

    By the database clock, so a listing agrees with what a claim would say
    before the sweeper has run.
    """
    return cast(PausedRunQuerySet, pauses).with_current_status()


def in_status(status: str) -> Q:
    """The pauses whose current status (see ``with_current_status``) is ``status``.

    Written on the stored columns, so the (status, expires_at) index serves it.
    """
    return pause_in_status(status)


# What a listing of pauses filters by (``pauses_page``).
FILTERS = ("owner", "chat_id", "tool_call_id", "status")


def pauses_page(
    *, reach: Reach | None = None, offset: int = 0, limit: int, **filters: str
) -> Page[PausedRun]:
    """A page of pauses, newest first: ``limit`` of them from ``offset``, each with its
    ``current_status`` (see ``with_current_status``), and how many match in all.

    ``filters`` (each optional): ``owner``, ``chat_id``, ``tool_call_id`` (equal)
    and ``status`` (the current status, see ``in_status``); ``reach``: only the
    pauses its user created or its username owns (``None``: every pause).
    """
    for name, value in filters.items():
        if name not in FILTERS:
            raise BadInput(f"{name}: no such filter of pauses.", field=name)
        check_key(value, name)
    if filters.get("status", Status.PENDING) not in Status.values:
        raise BadInput(f"status: must be one of: {', '.join(Status.values)}.", field="status")
    if offset < 0 or limit < 1:
        raise BadInput("offset must be 0 or more and limit 1 or more.", field="limit")
    return backend().pauses_page(filters, reach, offset, limit)


@takes_by("user", "actor")
def put_pause(
    chat_id: str,
    tool_call_id: str,
    owner: str,
    payload: Any,
    ttl: timedelta | int | float | None = None,
    *,
    by: By = None,
    reach: Reach | None = None,
) -> PausedRun:
    """Keep a run pending for ``owner`` under a new question; returns the pause.

    Replaces any earlier pause of the call whatever its status (its question
    becomes stale), with a fresh expiry ``ttl`` from now by the database
    clock; replacing one outside ``reach`` is refused as not found and
    changes nothing.
    """
    _check_keys(chat_id, tool_call_id)
    check_key(owner, "owner")
    check_json(payload, "payload")
    changed = backend().put_pause(
        chat_id,
        tool_call_id,
        owner,
        payload,
        _ttl(ttl),
        uuid.uuid4(),
        reach,
        acting(by),
    )
    return _announced(changed)


@takes_by("user", "actor")
def put(
    chat_id: str,
    tool_call_id: str,
    owner: str,
    payload: Any,
    ttl: timedelta | int | float | None = None,
    *,
    by: By = None,
) -> str:
    """Keep a run pending for ``owner``; returns the id of the question it waits on."""
    return str(put_pause(chat_id, tool_call_id, owner, payload, ttl, by=by).question_id)


@takes_by("user", "actor")
def claim_pause(
    chat_id: str,
    tool_call_id: str,
    owner: str,
    question_id: str | uuid.UUID,
    *,
    by: By = None,
) -> PausedRun:
    """Claim the pause to carry its run on: exactly once, only by its owner.

    Refusals, the first that applies: ``PauseNotFound`` (also another
    owner's), ``QuestionSuperseded``, ``AlreadyClaimed``, ``AlreadyResolved``,
    ``PauseExpired`` (by the database clock, swept or not). The claim is
    recorded as ``by``'s (its name, else its username), else the owner's.
    """
    _check_keys(chat_id, tool_call_id)
    check_key(owner, "owner")
    claimer = acting(by)
    if not claimer.name:
        claimer = dataclasses.replace(claimer, name=owner)
    changed = backend().claim(chat_id, tool_call_id, owner, _question(question_id), claimer)
    return _announced(changed)


@takes_by("user", "actor")
def claim(
    chat_id: str,
    tool_call_id: str,
    owner: str,
    question_id: str | uuid.UUID,
    *,
    by: By = None,
) -> Any:
    """Claim the pause (see ``claim_pause``); returns its payload."""
    return claim_pause(chat_id, tool_call_id, owner, question_id, by=by).payload


@takes_by("user", "actor")
def resolve(
    chat_id: str,
    tool_call_id: str,
    *,
    by: By = None,
    reach: Reach | None = None,
) -> PausedRun:
    """Mark a claimed pause done with, so it can never be carried on again.

    Any other status: ``NotClaimed``; outside ``reach``: ``PauseNotFound``.
    """
    _check_keys(chat_id, tool_call_id)
    return _announced(backend().resolve(chat_id, tool_call_id, reach, acting(by)))


@takes_by("user", "actor")
def cancel(
    chat_id: str,
    tool_call_id: str,
    *,
    by: By = None,
    reach: Reach | None = None,
) -> PausedRun:
    """Remove a pending pause; returns it as it was (its event keeps the record).

    Any other status, and a pending pause already past its expiry by the
    database clock (it is expired, swept or not): ``NotPending``; outside
    ``reach``: ``PauseNotFound``.
    """
    _check_keys(chat_id, tool_call_id)
    return _announced(backend().cancel(chat_id, tool_call_id, reach, acting(by)))


# The async forms, for async callers (agent frameworks): each runs its function in
# Django's thread for the database, so the event loop never waits on it.
aput_pause = sync_to_async(put_pause)
aput = sync_to_async(put)
aclaim_pause = sync_to_async(claim_pause)
aclaim = sync_to_async(claim)
aresolve = sync_to_async(resolve)
acancel = sync_to_async(cancel)
