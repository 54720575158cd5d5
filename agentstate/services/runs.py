"""Runs, token usage and approval records (docs/concepts.md).

After the OpenAI Agents SDK's ``RunContextWrapper``: a run keeps the
application's JSON context, accumulated usage, and per tool an approval
record ``{"approved": true | false | [call ids], "rejected": ...}``. A
boolean side is stored in ``ApprovalRecord.approved_always`` /
``rejected_always``; a list side is ``None`` there and its call ids are
``ApprovalCall`` rows, each with who decided, when and why. ``records()``
maps them back to exactly the SDK's JSON, so a client can hand it back.

Every change of a run's records locks the run's row first (one lock order
for approve, reject, rebuild and ``approvals.decide``). Usage is added with
one ``UPDATE ... RETURNING``, so concurrent additions never lose one.
"""

import uuid
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from agentstate import events
from agentstate.db import atomic_retry, prepared, returned
from agentstate.exceptions import BadInput, RunExists, RunNotFound
from agentstate.models import ApprovalCall, ApprovalRecord, Run
from agentstate.validation import check_json, check_key, check_run_id, text_problem

User = AbstractBaseUser | None
Records = dict[str, dict[str, bool | list[str]]]

MAX_INCREMENT = 2**53
# The largest total a usage column holds (a 64-bit integer).
MAX_TOTAL = 2**63 - 1
# Plain strings: a TextChoices member hashes by its name, not its value.
APPROVE, REJECT = str(ApprovalCall.Decision.APPROVE.value), str(ApprovalCall.Decision.REJECT.value)
SIDES = {"approved": APPROVE, "rejected": REJECT}


def real_user(user: Any) -> Any:
    """The user to store as who did it: ``None`` for anonymous or no user."""
    return user if getattr(user, "is_authenticated", False) else None


# Runs.


@atomic_retry
def create_run(run_id: str | None = None, context: Any = None, *, user: User = None) -> Run:
    """A new run; ``run_id`` is generated (a UUID) when omitted, ``RunExists`` if taken.

    A ``context`` of ``None`` is stored as ``{}`` (the SDK's empty context).
    """
    run_id = str(uuid.uuid4()) if run_id is None else check_run_id(run_id)
    check_json(context, "context")
    if Run.objects.filter(run_id=run_id).exists():
        raise RunExists(f"A run with run_id {run_id!r} already exists.")
    # A racing creator of the same id fails on the unique constraint; the
    # retry of ``atomic_retry`` then sees its run and answers RunExists.
    return Run.objects.create(
        run_id=run_id, context={} if context is None else context, created_by=real_user(user)
    )


def get_run(run_id: str, among: QuerySet | None = None) -> Run:
    """The run named ``run_id``; one outside ``among`` is not found, like a missing one."""
    if not isinstance(run_id, str):
        raise RunNotFound("Run not found.")
    run = (Run.objects.all() if among is None else among).filter(run_id=run_id).first()
    if run is None:
        raise RunNotFound(f"Run {run_id!r} not found.")
    return run


@atomic_retry
def update_run(run: Run, context: Any) -> Run:
    """Replace the run's context (``None`` stores ``{}``)."""
    check_json(context, "context")
    run.context = {} if context is None else context
    Run.objects.filter(pk=run.pk).update(context=run.context)
    return run


def lock_run(run: Run) -> Run:
    """The run's row, locked: the first lock of every change to its records."""
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    locked = returned(Run, f"SELECT * FROM {Run._meta.db_table} WHERE id = %s{lock}", [run.pk])
    if not locked:
        raise RunNotFound(f"Run {run.run_id!r} not found.")
    return locked[0]


# Usage.


def _increment(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInput(f"{name} must be a non-negative integer.", field=name)
    if value > MAX_INCREMENT:
        raise BadInput(f"{name} must be at most 2**53.", field=name)
    return value


def add_usage(
    run: Run,
    requests: int = 1,
    input_tokens: int = 0,
    output_tokens: int = 0,
    total_tokens: int | None = None,
    cached_tokens: int = 0,
    reasoning_tokens: int = 0,
) -> dict[str, int]:
    """Add to the run's usage in one statement; returns the accumulated usage.

    ``total_tokens`` defaults to ``input_tokens + output_tokens``. The
    increments are evaluated by the database under the row lock the UPDATE
    takes, so no concurrent addition is lost; ``RETURNING`` gives the totals
    it wrote, with no transaction around it.
    """
    if total_tokens is None:
        total_tokens = _increment("input_tokens", input_tokens) + _increment(
            "output_tokens", output_tokens
        )
    given = {
        "requests": requests,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": total_tokens,
        "cached_tokens": cached_tokens,
        "reasoning_tokens": reasoning_tokens,
    }
    increments = {name: _increment(name, value) for name, value in given.items()}
    columns = [connection.ops.quote_name(name) for name in increments]
    # A total must stay within the column (PostgreSQL would raise, SQLite
    # would turn it into a float): the UPDATE matches only if every one fits.
    # One statement text whatever the values, so PostgreSQL prepares it once.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Run._meta.db_table} SET {', '.join(f'{c} = {c} + %s' for c in columns)}"
            f" WHERE {' AND '.join(['id = %s', *(f'{c} <= %s' for c in columns)])}"
            f" RETURNING {', '.join(columns)}",
            [*increments.values(), run.pk, *(MAX_TOTAL - value for value in increments.values())],
        )
        row = cursor.fetchone()
    if row is None:
        totals = Run.objects.filter(pk=run.pk).values(*increments).first()
        if totals is None:
            raise RunNotFound(f"Run {run.run_id!r} not found.")
        over = [n for n, value in increments.items() if totals[n] > MAX_TOTAL - value]
        name = (over or list(increments))[0]
        raise BadInput(f"{name} would exceed the largest total, 2**63 - 1.", field=name)
    usage = dict(zip(increments, row, strict=True))
    for name, value in usage.items():
        setattr(run, name, value)
    return usage


# Approval records.


def records(run: Run) -> Records:
    """The run's approval records in the Agents SDK's JSON form: one query."""
    r, c = ApprovalRecord._meta, ApprovalCall._meta
    tool_name = r.get_field("tool_name").column
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.{tool_name}, r.{r.get_field('approved_always').column},"
            f" r.{r.get_field('rejected_always').column}, c.{c.get_field('decision').column},"
            f" c.{c.get_field('call_id').column} FROM {r.db_table} r LEFT JOIN {c.db_table} c"
            f" ON c.{c.get_field('record').column} = r.{r.pk.column}"
            f" WHERE r.{r.get_field('run').column} = %s ORDER BY r.{tool_name}, c.{c.pk.column}",
            [run.pk],
        )
        rows = cursor.fetchall()
    found: dict[str, tuple[ApprovalRecord, list[tuple[str, str]]]] = {}
    for tool_name, approved_always, rejected_always, decision, call_id in rows:
        if tool_name not in found:
            flags = ApprovalRecord(
                approved_always=_boolean(approved_always), rejected_always=_boolean(rejected_always)
            )
            found[tool_name] = (flags, [])
        if call_id is not None:
            found[tool_name][1].append((decision, call_id))
    return {tool_name: record_json(flags, calls) for tool_name, (flags, calls) in found.items()}


def _boolean(value: Any) -> bool | None:
    """A nullable boolean column as read (SQLite gives 0 and 1)."""
    return None if value is None else bool(value)


def record_json(
    record: ApprovalRecord, calls: list[tuple[str, str]] | None = None
) -> dict[str, bool | list[str]]:
    """One tool's ``{"approved", "rejected"}``: a flag, or the call ids in decision order.

    ``calls``: the record's ``(decision, call_id)`` pairs in that order, when
    already read; else they are read.
    """
    if calls is None:
        calls = [(c.decision, c.call_id) for c in sorted(record.calls.all(), key=lambda c: c.pk)]
    ids: dict[str, list[str]] = {APPROVE: [], REJECT: []}
    for decision, call_id in calls:
        ids[decision].append(call_id)
    return {
        "approved": ids[APPROVE] if record.approved_always is None else record.approved_always,
        "rejected": ids[REJECT] if record.rejected_always is None else record.rejected_always,
    }


def decide_from(record: Mapping[str, bool | list[str]] | None, call_id: str) -> bool | None:
    """The SDK's precedence over one tool's record (docs/concepts.md).

    Permanent approval wins over permanent rejection; then permanent
    rejection; then the call id in ``approved`` (even if also in
    ``rejected``); then in ``rejected``; else ``None`` (undecided).
    """
    if record is None:
        return None
    approved, rejected = record.get("approved"), record.get("rejected")
    if approved is True:
        return True
    if rejected is True:
        return False
    if isinstance(approved, list) and call_id in approved:
        return True
    if isinstance(rejected, list) and call_id in rejected:
        return False
    return None


def is_tool_approved(run: Run, tool_name: str, call_id: str) -> bool | None:
    """``True``, ``False`` or ``None`` (pending) for one call of ``tool_name``."""
    check_key(tool_name, "tool_name")
    check_key(call_id, "call_id")
    return decide_from(records(run).get(tool_name), call_id)


def _written_record(
    run: Run, tool_name: str, user: User, flags: tuple[bool, bool | None] | None
) -> ApprovalRecord:
    """The tool's record, created in the SDK's list form when absent, marked updated by
    ``user`` now and, given ``flags`` (``approved_always``, ``rejected_always``), set to
    them: one upsert, which leaves the row locked, returning it."""
    table, field = ApprovalRecord._meta.db_table, ApprovalRecord._meta.get_field
    values = {
        "run": run.pk,
        "tool_name": tool_name,
        "approved_always": None if flags is None else flags[0],
        "rejected_always": None if flags is None else flags[1],
        "updated_at": timezone.now(),
        "updated_by": getattr(real_user(user), "pk", None),
    }
    changed = ["updated_at", "updated_by"]
    if flags is not None:
        changed += ["approved_always", "rejected_always"]
    columns, params = prepared(ApprovalRecord, values)
    (record,) = returned(
        ApprovalRecord,
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(params))})"
        f" ON CONFLICT ({field('run').column}, {field('tool_name').column}) DO UPDATE SET"
        f" {', '.join(f'{field(n).column} = excluded.{field(n).column}' for n in changed)}"
        " RETURNING *",
        params,
    )
    return record


def check_reason(reason: Any) -> str:
    if not isinstance(reason, str):
        raise BadInput("reason must be a string.", field="reason")
    problem = text_problem(reason)
    if problem:
        raise BadInput(f"reason {problem}.", field="reason")
    return reason


def record_decision(
    run: Run, tool_name: str, call_id: str, decision: str, always: bool, user: User, reason: str
) -> Run:
    """Approve or reject, the SDK's way, and record who, when and why; returns the run locked.

    Must run inside a transaction (``approve``, ``reject``, ``approvals.decide``).
    """
    check_key(tool_name, "tool_name")
    check_key(call_id, "call_id")
    if not isinstance(always, bool):
        raise BadInput("always must be true or false.", field="always")
    reason = check_reason(reason)
    run = lock_run(run)
    # approve always: {"approved": true, "rejected": []};
    # reject always:  {"approved": false, "rejected": true}.
    flags = (decision == APPROVE, None if decision == APPROVE else True) if always else None
    record = _written_record(run, tool_name, user, flags)
    if always:
        ApprovalCall.objects.filter(record=record).delete()
    elif (record.approved_always if decision == APPROVE else record.rejected_always) is None:
        ApprovalCall.objects.bulk_create(
            [
                ApprovalCall(
                    record=record,
                    call_id=call_id,
                    decision=decision,
                    decided_by=real_user(user),
                    reason=reason,
                )
            ],
            ignore_conflicts=True,
        )
    events.record(
        "approvals.changed",
        run,
        object_id=run.run_id,
        user=user,
        details={
            "tool_name": tool_name,
            "call_id": call_id,
            "decision": decision,
            "always": always,
            "reason": reason,
        },
    )
    return run


@atomic_retry
def approve(
    run: Run,
    tool_name: str,
    call_id: str,
    always: bool = False,
    *,
    user: User = None,
    reason: str = "",
) -> Records:
    """Approve one call (appended when ``approved`` is a list) or, ``always``, every call.

    Returns the run's records map.
    """
    return records(record_decision(run, tool_name, call_id, APPROVE, always, user, reason))


@atomic_retry
def reject(
    run: Run,
    tool_name: str,
    call_id: str,
    always: bool = False,
    *,
    user: User = None,
    reason: str = "",
) -> Records:
    """Reject one call (appended when ``rejected`` is a list) or, ``always``, every call.

    Returns the run's records map.
    """
    return records(record_decision(run, tool_name, call_id, REJECT, always, user, reason))


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


@atomic_retry
def rebuild_approvals(run: Run, value: Any, *, user: User = None) -> Records:
    """Replace every approval record of the run with ``value`` (validated first).

    One transaction: the run's records are either all replaced or untouched.
    """
    checked = check_records(value)
    run = lock_run(run)
    ApprovalRecord.objects.filter(run=run).delete()
    created = ApprovalRecord.objects.bulk_create(
        ApprovalRecord(
            run=run,
            tool_name=tool_name,
            approved_always=sides["approved"] if isinstance(sides["approved"], bool) else None,
            rejected_always=sides["rejected"] if isinstance(sides["rejected"], bool) else None,
            updated_by=real_user(user),
        )
        for tool_name, sides in checked.items()
    )
    by_tool = {record.tool_name: record for record in ApprovalRecord.objects.filter(run=run)}
    ApprovalCall.objects.bulk_create(
        ApprovalCall(
            record=by_tool[tool_name],
            call_id=call_id,
            decision=SIDES[side],
            decided_by=real_user(user),
        )
        for tool_name, sides in checked.items()
        for side in SIDES
        if isinstance(sides[side], list)
        for call_id in sides[side]
    )
    events.record(
        "approvals.rebuilt", run, object_id=run.run_id, user=user, details={"tools": len(created)}
    )
    return records(run)


def to_json(run: Run) -> dict[str, Any]:
    """``{"run_id", "context", "usage", "approvals"}``: what a client stores to resume."""
    return {
        "run_id": run.run_id,
        "context": run.context,
        "usage": run.usage,
        "approvals": records(run),
    }
