"""The expiry sweep: what nobody answered in time.

Marks pending pauses past ``expires_at`` expired, marks pending approval
requests older than ``APPROVAL_TTL`` expired (those filed under a rule: at
their own deadline, which does what the rule says, and writes their reminder
and escalation events once), deletes resolved and expired
pauses older than ``RETENTION``, events (with their webhook deliveries and
attempts) older than ``EVENT_RETENTION``, when ``THREAD_TTL`` is set,
LangGraph threads (with their checkpoints, values and writes) not written for
longer, and the LangGraph store's items past their TTL. All by the database
clock, in batches of ``SWEEP_BATCH_SIZE``: each batch is one operation of the
database's backend (``agentstate.backends``), which locks its rows without
waiting (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so two sweeps at once take
disjoint batches and never wait on a claim in progress), changes them with
one bulk statement and appends one event per row. Memory stays bounded by
the batch whatever the backlog. Running it again changes nothing more, so it
is idempotent; the Celery task and the management command both call
``sweep()``.

Correctness never depends on the sweep: a claim or a decision checks the
expiry itself. The sweep makes the state visible and keeps tables small.
"""

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from django.db import models

from agentstate import events
from agentstate.backends import Backend, Changed, backend
from agentstate.conf import agentstate_settings
from agentstate.models import ApprovalRequest, PausedRun

Progress = Callable[[str, int], None]


@dataclass(frozen=True)
class SweepResult:
    expired_pauses: int = 0
    expired_approval_requests: int = 0
    purged_pauses: int = 0
    purged_events: int = 0
    purged_threads: int = 0
    purged_store_items: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def _announced(changed: Changed[int], model: type[models.Model]) -> int:
    events.announce(changed.events, model)
    return changed.value


def _in_batches(
    batch: Callable[[int], int], size: int, label: str, progress: Progress | None
) -> int:
    """Run ``batch(size)`` until a batch does less than ``size``; the total done."""
    total = 0
    while done := batch(size):
        total += done
        if progress is not None:
            progress(label, total)
        if done < size:
            break
    return total


def sweep(*, batch_size: int | None = None, progress: Progress | None = None) -> SweepResult:
    """Expire what is overdue and purge what is past retention; returns the counts.

    ``progress(label, total_so_far)`` is called after every batch.
    """
    size = batch_size or agentstate_settings.SWEEP_BATCH_SIZE
    store: Backend = backend()
    approval_ttl, retention = agentstate_settings.APPROVAL_TTL, agentstate_settings.RETENTION
    thread_ttl = agentstate_settings.THREAD_TTL
    return SweepResult(
        expired_pauses=_expire_pauses(store, size, progress),
        expired_approval_requests=_in_batches(
            lambda n: _announced(store.expire_approval_requests(n, approval_ttl), ApprovalRequest),
            size,
            "expired approval requests",
            progress,
        )
        + apply_deadlines(store, size, progress),
        purged_pauses=_in_batches(
            lambda n: store.purge_pauses(n, retention), size, "purged pauses", progress
        ),
        purged_events=_in_batches(
            lambda n: store.purge_events(n, agentstate_settings.EVENT_RETENTION),
            size,
            "purged events",
            progress,
        ),
        purged_threads=0
        if thread_ttl is None
        else _in_batches(
            lambda n: store.purge_threads(n, thread_ttl), size, "purged threads", progress
        ),
        purged_store_items=purge_store_items(store, size, progress),
    )


def _going_on(operation: Callable[[int, Any], Changed[int]]) -> Callable[[int], Changed[int]]:
    """``operation(size, after)`` as one batch after another, each from where the last
    ended (``Changed.after``)."""
    after = None

    def batch(n: int) -> Changed[int]:
        nonlocal after
        changed = operation(n, after)
        after = changed.after
        return changed

    return batch


def _expire_pauses(store: Backend, size: int, progress: Progress | None) -> int:
    """The pauses past expiry, each batch from where the last ended; their events built
    and announced only when a receiver listens to their signals."""
    answer = events.heard("pause.expired", PausedRun)
    batch = _going_on(lambda n, after: store.expire_pauses(n, after, answer))
    return _in_batches(lambda n: _announced(batch(n), PausedRun), size, "expired pauses", progress)


def apply_deadlines(store: Backend, size: int, progress: Progress | None = None) -> int:
    """The deadlines of the requests filed under a rule: each one's ``on_deadline``
    applied once, and its reminder and escalation events written once, each batch
    from where the last ended; how many requests reached their deadline (expired or
    decided by it)."""
    reached = 0
    due = _going_on(store.apply_deadlines)

    def batch(n: int) -> int:
        nonlocal reached
        changed = due(n)
        events.announce(changed.events, ApprovalRequest)
        reached += sum(e.kind in ("approval.expired", "approval.decided") for e in changed.events)
        return changed.value

    _in_batches(batch, size, "approval deadlines", progress)
    return reached


def purge_store_items(store: Backend, size: int, progress: Progress | None = None) -> int:
    """Delete the LangGraph store's expired items, ``size`` per batch, each batch from
    where the last ended (each item read once); how many."""
    batch = _going_on(lambda n, after: store.purge_store_items(n, after))
    return _in_batches(lambda n: batch(n).value, size, "purged store items", progress)
