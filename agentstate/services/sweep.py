"""The expiry sweep (docs/concepts.md#expiry): what nobody answered in time.

Marks pending pauses past ``expires_at`` expired, marks pending approval
requests older than ``APPROVAL_TTL`` expired, and deletes resolved and
expired pauses older than ``RETENTION``. All by the database clock, in
batches of ``SWEEP_BATCH_SIZE``: each batch is one transaction that locks its
rows (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so two sweeps at once take
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

from django.db import connection
from django.db.models.functions import Now

from agentstate import events
from agentstate.conf import agentstate_settings
from agentstate.db import atomic_retry
from agentstate.models import ApprovalRequest, Event, PausedRun
from agentstate.services.pauses import OBJECT_ID_SEPARATOR, object_id

ACTOR = "sweeper"

Progress = Callable[[str, int], None]


@dataclass(frozen=True)
class SweepResult:
    expired_pauses: int = 0
    expired_approval_requests: int = 0
    purged_pauses: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


# PostgreSQL: a batch of pauses expired in one statement, their events
# written by the same statement from the rows it changed. SKIP LOCKED passes
# over a pause a claim holds; a row claimed meanwhile no longer matches the
# WHERE when the lock is taken, so it is never both claimed and expired.
EXPIRE_PAUSES_SQL = f"""
WITH batch AS (
    SELECT id FROM {PausedRun._meta.db_table}
    WHERE status = %(pending)s AND expires_at <= STATEMENT_TIMESTAMP()
    ORDER BY expires_at LIMIT %(size)s FOR UPDATE SKIP LOCKED
), expired AS (
    UPDATE {PausedRun._meta.db_table} AS pause SET status = %(expired)s FROM batch
    WHERE pause.id = batch.id
    RETURNING pause.chat_id, pause.tool_call_id, pause.owner, pause.created_by_id,
              pause.question_id
)
INSERT INTO {Event._meta.db_table} (kind, actor, object_type, object_id, created_by_id, owner, details)
SELECT %(kind)s, %(actor)s, %(object_type)s, chat_id || %(separator)s || tool_call_id,
       created_by_id, owner, jsonb_build_object('question_id', question_id::text)
FROM expired
RETURNING id, object_id, created_by_id, owner, details, created_at
"""


def _expire_pauses_in_sql(size: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            EXPIRE_PAUSES_SQL,
            {
                "pending": PausedRun.Status.PENDING,
                "expired": PausedRun.Status.EXPIRED,
                "size": size,
                "kind": "pause.expired",
                "actor": ACTOR,
                "object_type": PausedRun._meta.model_name,
                "separator": OBJECT_ID_SEPARATOR,
            },
        )
        rows = cursor.fetchall()
    if rows and events.listened("pause.expired", PausedRun):
        details = Event._meta.get_field("details")
        events.announce(
            [
                Event(
                    pk=pk,
                    kind="pause.expired",
                    actor=ACTOR,
                    object_type=PausedRun._meta.model_name,
                    object_id=object_id,
                    created_by_id=created_by_id,
                    owner=owner,
                    details=details.from_db_value(detail, None, connection),
                    created_at=created_at,
                )
                for pk, object_id, created_by_id, owner, detail, created_at in rows
            ],
            PausedRun,
        )
    return len(rows)


@atomic_retry
def _expire_pause_batch(size: int) -> int:
    if connection.vendor == "postgresql":
        return _expire_pauses_in_sql(size)
    rows = list(
        PausedRun.objects.pending()
        .past_expiry()
        .select_for_update(skip_locked=True)
        .order_by("expires_at")
        .values_list("pk", "chat_id", "tool_call_id", "owner", "created_by_id", "question_id")[
            :size
        ]
    )
    if not rows:
        return 0
    # The rows are locked and were pending past expiry: one UPDATE for all.
    PausedRun.objects.filter(pk__in=[row[0] for row in rows]).update(
        status=PausedRun.Status.EXPIRED
    )
    events.record_many(
        "pause.expired",
        PausedRun,
        [
            {
                "object_id": object_id(chat_id, tool_call_id),
                "actor": ACTOR,
                "owner": owner,
                "created_by_id": created_by_id,
                "details": {"question_id": str(question_id)},
            }
            for _pk, chat_id, tool_call_id, owner, created_by_id, question_id in rows
        ],
    )
    return len(rows)


@atomic_retry
def _expire_approval_batch(size: int) -> int:
    rows = list(
        ApprovalRequest.objects.pending()
        .older_than(agentstate_settings.APPROVAL_TTL)
        .select_for_update(skip_locked=True, of=("self",))
        .order_by("created_at")
        .values_list("pk", "created_by_id", "run__run_id", "tool_name", "call_id")[:size]
    )
    if not rows:
        return 0
    ApprovalRequest.objects.filter(pk__in=[row[0] for row in rows]).update(
        status=ApprovalRequest.Status.EXPIRED
    )
    events.record_many(
        "approval.expired",
        ApprovalRequest,
        [
            {
                "object_id": str(pk),
                "actor": ACTOR,
                "created_by_id": created_by_id,
                "details": {"run_id": run_id, "tool_name": tool_name, "call_id": call_id},
            }
            for pk, created_by_id, run_id, tool_name, call_id in rows
        ],
    )
    return len(rows)


@atomic_retry
def _purge_pause_batch(size: int) -> int:
    pks = list(
        PausedRun.objects.finished_before(Now() - agentstate_settings.RETENTION)
        .select_for_update(skip_locked=True)
        .order_by()
        .values_list("pk", flat=True)[:size]
    )
    if not pks:
        return 0
    PausedRun.objects.filter(pk__in=pks).delete()
    return len(pks)


def _in_batches(
    batch: Callable[[int], int], size: int, label: str, progress: Progress | None
) -> int:
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
    return SweepResult(
        expired_pauses=_in_batches(_expire_pause_batch, size, "expired pauses", progress),
        expired_approval_requests=_in_batches(
            _expire_approval_batch, size, "expired approval requests", progress
        ),
        purged_pauses=_in_batches(_purge_pause_batch, size, "purged pauses", progress),
    )
