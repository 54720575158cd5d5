"""Runs, token usage and approval records: every rule of the docs' "Runs" page.

After the OpenAI Agents SDK's ``RunContextWrapper``: a run keeps the
application's JSON context, accumulated usage, and per tool an approval
record ``{"approved": true | false | [call ids], "rejected": ...}``
(``agentstate.records``), each per-call decision kept with who, when and
why. ``to_json()`` gives exactly the SDK's JSON, so a client can hand it
back and ``rebuild_approvals`` takes it.

The functions check their arguments and leave the storing to the
database's backend (``agentstate.backends``), one operation each: it locks
the run's row first for every change, so usage is added without a lost
update and decisions queue in one order. A run is named by a ``Run`` or its
run id; ``reach`` (``None``: every run) limits the runs a REST caller may
touch, one outside it answering ``RunNotFound`` like a missing one. The
signals of the events an operation wrote go out after commit.
"""

import re
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser

from agentstate import events
from agentstate.backends import backend
from agentstate.exceptions import BadInput, RunNotFound
from agentstate.models import Run
from agentstate.records import (
    APPROVE,
    REJECT,
    SIDES,
    decide_from,
    record_json,
)
from agentstate.types import USAGE_FIELDS, Reach, Records, Verdict, arguments_digest
from agentstate.validation import RUN_ID_RE, check_json, check_key, check_run_id, text_problem

from .acting import By, acting, takes_by

DIGEST = re.compile(r"[0-9a-f]{64}")

__all__ = [
    "APPROVE",
    "aadd_usage",
    "aapprove",
    "acreate_run",
    "aget_run",
    "ais_tool_approved",
    "areject",
    "aupdate_run",
    "MAX_INCREMENT",
    "REJECT",
    "SIDES",
    "Records",
    "add_usage",
    "approve",
    "as_json",
    "check_reason",
    "check_records",
    "create_run",
    "decide_from",
    "get_run",
    "is_tool_approved",
    "verdict",
    "check_digest",
    "real_user",
    "rebuild_approvals",
    "record_json",
    "records",
    "reject",
    "run_id_of",
    "to_json",
    "update_run",
]

# Who makes a change: a user, or none (anonymous or no user, recorded as no user).
User = AbstractBaseUser | AnonymousUser | None
RunRef = Run | str

MAX_INCREMENT = 2**53


def real_user(user: Any) -> Any:
    """The user to store as who did it: ``None`` for anonymous or no user."""
    return user if getattr(user, "is_authenticated", False) else None


def run_id_of(run: RunRef) -> str:
    """The run id of a ``Run`` or of a run id. A value no run id can be names no
    run: ``RunNotFound``, without asking the database."""
    if isinstance(run, Run):
        return run.run_id
    if not isinstance(run, str):
        raise RunNotFound()
    if not RUN_ID_RE.fullmatch(run) or run in {".", ".."}:
        raise RunNotFound.of(run_id=run)
    return run


# Runs.


def create_run(run_id: str | None = None, context: Any = None, *, user: User = None) -> Run:
    """A new run; ``run_id`` is generated (a UUID) when omitted, ``RunExists`` if taken.

    A ``context`` of ``None`` is stored as ``{}`` (the SDK's empty context).
    Returns the run with its (empty) ``approvals``.
    """
    run_id = str(uuid.uuid4()) if run_id is None else check_run_id(run_id)
    check_json(context, "context")
    created_by = real_user(user)
    return backend().create_run(
        run_id, {} if context is None else context, None if created_by is None else created_by.pk
    )


def get_run(run_id: str, *, reach: Reach | None = None) -> Run:
    """The run named ``run_id``, with its records map as ``approvals``; one outside
    ``reach`` is not found, like a missing one."""
    return backend().run(run_id_of(run_id), reach)


def update_run(run: RunRef, context: Any, *, reach: Reach | None = None) -> Run:
    """Replace the run's context (``None`` stores ``{}``); returns the run with its
    ``approvals``."""
    check_json(context, "context")
    return backend().update_run(run_id_of(run), {} if context is None else context, reach)


def as_json(run: Run) -> dict[str, Any]:
    """``{"run_id", "context", "usage", "approvals"}`` of a run read with its
    ``approvals`` (as every function here returns one)."""
    return {
        "run_id": run.run_id,
        "context": run.context,
        "usage": run.usage,
        "approvals": run.approvals,
    }


def to_json(run: RunRef, *, reach: Reach | None = None) -> dict[str, Any]:
    """What a client stores to resume: the run's current ``as_json``, read in one operation."""
    return as_json(backend().run(run_id_of(run), reach))


# Usage.


def _increment(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInput(f"{name} must be a non-negative integer.", field=name)
    if value > MAX_INCREMENT:
        raise BadInput(f"{name} must be at most 2**53.", field=name)
    return value


def add_usage(
    run: RunRef,
    requests: int = 1,
    input_tokens: int = 0,
    output_tokens: int = 0,
    total_tokens: int | None = None,
    cached_tokens: int = 0,
    reasoning_tokens: int = 0,
    *,
    reach: Reach | None = None,
) -> dict[str, int]:
    """Add to the run's usage atomically; returns the accumulated usage.

    ``total_tokens`` defaults to ``input_tokens + output_tokens``. A total
    that would pass 2**63 - 1 is ``BadInput`` naming the counter, and nothing
    is added. A ``Run`` given is updated to the totals.
    """
    if total_tokens is None:
        total_tokens = _increment("input_tokens", input_tokens) + _increment(
            "output_tokens", output_tokens
        )
    given = (requests, input_tokens, output_tokens, total_tokens, cached_tokens, reasoning_tokens)
    increments = {
        name: _increment(name, value) for name, value in zip(USAGE_FIELDS, given, strict=True)
    }
    usage = backend().add_usage(run_id_of(run), increments, reach)
    if isinstance(run, Run):
        for name, value in usage.items():
            setattr(run, name, value)
    return usage


# Approval records.


def records(run: RunRef, *, reach: Reach | None = None) -> Records:
    """The run's approval records in the Agents SDK's JSON form."""
    return backend().records(run_id_of(run), reach)


def is_tool_approved(
    run: RunRef,
    tool_name: str,
    call_id: str,
    arguments: Any = None,
    *,
    reach: Reach | None = None,
) -> bool | None:
    """``True``, ``False`` or ``None`` (pending) for one call of ``tool_name``, by the
    SDK's precedence (``records.decide_from``); left pending by the records, by the
    active approval policies that match the call (a reject policy over an approve
    one). A policy with an arguments pattern applies only when ``arguments`` (the
    call's) are given. Given ``arguments``, a call whose request was approved for
    other arguments (edited, or another call's) is ``False``: see ``verdict``."""
    return verdict(run, tool_name, call_id, arguments, reach=reach)[0]


def verdict(
    run: RunRef,
    tool_name: str,
    call_id: str,
    arguments: Any = None,
    *,
    digest: str | None = None,
    reach: Reach | None = None,
) -> Verdict:
    """``is_tool_approved`` with its reason: ``(approved, reason)``. Approved only for
    the arguments it was approved with, named by ``arguments`` or by their ``digest``
    (``types.arguments_digest``); others answer ``(False, "arguments_changed")``."""
    check_key(tool_name, "tool_name")
    check_key(call_id, "call_id")
    check_json(arguments, "arguments")
    if digest is None and arguments is not None:
        digest = arguments_digest(arguments)
    elif digest is not None:
        check_digest(digest)
    return backend().is_tool_approved(run_id_of(run), tool_name, call_id, arguments, digest, reach)


def check_digest(digest: Any, field: str = "arguments_digest") -> str:
    """A SHA-256 in lowercase hex (64 characters), else ``BadInput``."""
    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
        raise BadInput(f"{field} must be a SHA-256 in lowercase hex.", field=field)
    return digest


def check_reason(reason: Any) -> str:
    if not isinstance(reason, str):
        raise BadInput("reason must be a string.", field="reason")
    problem = text_problem(reason)
    if problem:
        raise BadInput(f"reason {problem}.", field="reason")
    return reason


def _decide(
    run: RunRef,
    tool_name: str,
    call_id: str,
    approve: bool,
    always: bool,
    by: By,
    reason: str,
    reach: Reach | None,
) -> Records:
    check_key(tool_name, "tool_name")
    check_key(call_id, "call_id")
    if not isinstance(always, bool):
        raise BadInput("always must be true or false.", field="always")
    changed = backend().record_decision(
        run_id_of(run),
        tool_name,
        call_id,
        approve,
        always,
        check_reason(reason),
        reach,
        acting(by),
    )
    events.announce(changed.events, Run, changed.value)
    return changed.value.approvals


@takes_by("user")
def approve(
    run: RunRef,
    tool_name: str,
    call_id: str,
    always: bool = False,
    *,
    by: By = None,
    reason: str = "",
    reach: Reach | None = None,
) -> Records:
    """Approve one call (appended when ``approved`` is a list) or, ``always``, every
    call: ``{"approved": true, "rejected": []}``. Returns the run's records map.

    A tool under an approval rule is approved so only by whom the rule lets decide
    alone: ``SelfApproval`` (the run's creator, unless allowed), ``NotAReviewer``,
    ``VotesRequired`` (the rule wants several approvals)."""
    return _decide(run, tool_name, call_id, True, always, by, reason, reach)


@takes_by("user")
def reject(
    run: RunRef,
    tool_name: str,
    call_id: str,
    always: bool = False,
    *,
    by: By = None,
    reason: str = "",
    reach: Reach | None = None,
) -> Records:
    """Reject one call (appended when ``rejected`` is a list) or, ``always``, every
    call: ``{"approved": false, "rejected": true}``. Returns the run's records map."""
    return _decide(run, tool_name, call_id, False, always, by, reason, reach)


def check_records(value: Any) -> Records:
    """A records map in the SDK's form, validated; sides left out are ``[]``.

    Errors name the place, e.g. ``mail.approved.2``. Duplicate call ids in
    one list are kept once.
    """
    if not isinstance(value, dict):
        raise BadInput(
            "The approval records must be an object keyed by tool name.", field="approvals"
        )
    checked: Records = {}
    for tool_name, record in value.items():
        check_key(tool_name, "tool_name")
        if not isinstance(record, dict):
            raise BadInput(
                f"{tool_name}: must be an object with 'approved' and 'rejected'.", field=tool_name
            )
        unknown = sorted(set(record) - set(SIDES))
        if unknown:
            raise BadInput(
                f"{tool_name}.{unknown[0]}: unknown field.", field=f"{tool_name}.{unknown[0]}"
            )
        checked[tool_name] = {}
        for side in SIDES:
            where = f"{tool_name}.{side}"
            given = record.get(side, [])
            if isinstance(given, bool):
                checked[tool_name][side] = given
                continue
            if not isinstance(given, list):
                raise BadInput(f"{where}: must be true, false or a list of call ids.", field=where)
            for index, call_id in enumerate(given):
                try:
                    check_key(call_id, "call_id")
                except BadInput as error:
                    raise BadInput(
                        f"{where}.{index}: {error.detail}", field=f"{where}.{index}"
                    ) from None
            checked[tool_name][side] = list(dict.fromkeys(given))
    return checked


@takes_by("user")
def rebuild_approvals(
    run: RunRef, value: Any, *, by: By = None, reach: Reach | None = None
) -> Records:
    """Replace every approval record of the run with ``value`` (validated first):
    all replaced or, refused, none touched. Returns the run's records map. An
    approval the records did not hold, of a tool under a rule, is refused as
    ``approve`` refuses it."""
    checked = check_records(value)
    changed = backend().rebuild_approvals(run_id_of(run), checked, reach, acting(by))
    events.announce(changed.events, Run, changed.value)
    return changed.value.approvals


# The async forms, for async callers (agent frameworks): each runs its function in
# Django's thread for the database, so the event loop never waits on it.
acreate_run = sync_to_async(create_run)
aget_run = sync_to_async(get_run)
aupdate_run = sync_to_async(update_run)
aadd_usage = sync_to_async(add_usage)
ais_tool_approved = sync_to_async(is_tool_approved)
aapprove = sync_to_async(approve)
areject = sync_to_async(reject)
