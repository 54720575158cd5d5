"""The sweep over 100,000 expired pauses runs in memory bounded by its batch.

Prints the figures (time, tracemalloc peak) for the closing note; the
assertion compares the peak with what loading every row would take,
measured in the same run, never a time. The rows are made by one
set-based INSERT so that the test spends its time on the sweep.
"""

import time
import tracemalloc

import pytest
from django.db import connection

from agentstate.models import Event, PausedRun
from agentstate.services.sweep import sweep

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROWS = 100_000
SAMPLE = 10_000

DIGITS = "(SELECT 0 AS d UNION ALL " + " UNION ALL ".join(f"SELECT {d}" for d in range(1, 10)) + ")"
FILL = {
    "postgresql": """
        INSERT INTO agentstate_pausedrun
            (chat_id, tool_call_id, owner, question_id, status, payload, created_at, expires_at, claimed_by)
        SELECT 'chat-' || (i / 100), 'call-' || i, 'user-' || (i %% 50), gen_random_uuid(), 'pending',
               %s::jsonb, now() - interval '1 hour', now() - interval '5 minutes', ''
        FROM generate_series(1, %s) AS i
    """,
    "sqlite": """
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s)
        INSERT INTO agentstate_pausedrun
            (chat_id, tool_call_id, owner, question_id, status, payload, created_at, expires_at, claimed_by)
        SELECT 'chat-' || (i / 100), 'call-' || i, 'user-' || (i %% 50), lower(hex(randomblob(16))),
               'pending', %s, datetime('now', '-1 hour'), datetime('now', '-5 minutes'), ''
        FROM n
    """,
    # MySQL stops a recursive CTE at 1,000 rows unless told otherwise: the
    # numbers come from five joined tables of ten digits instead.
    "mysql": f"""
        INSERT INTO agentstate_pausedrun
            (chat_id, tool_call_id, owner, question_id, status, payload, created_at, expires_at, claimed_by)
        SELECT CONCAT('chat-', i DIV 100), CONCAT('call-', i), CONCAT('user-', MOD(i, 50)),
               REPLACE(UUID(), '-', ''), 'pending', %s,
               UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6) - INTERVAL 5 MINUTE, ''
        FROM (
            SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS i
            FROM {DIGITS} a, {DIGITS} b, {DIGITS} c, {DIGITS} e, {DIGITS} f
        ) AS n
        WHERE i <= %s
    """,
}
PAYLOAD = '{"messages": ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"], "step": 7}'


def fill() -> None:
    params = [ROWS, PAYLOAD] if connection.vendor == "sqlite" else [PAYLOAD, ROWS]
    with connection.cursor() as cursor:
        cursor.execute(FILL[connection.vendor], params)


def traced(work) -> tuple[object, int, float]:
    """``work()``'s result, its tracemalloc peak in bytes, and its time in seconds."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1], time.perf_counter() - started
    finally:
        tracemalloc.stop()


def test_sweeping_100000_expired_pauses_stays_in_bounded_memory():
    fill()
    assert PausedRun.objects.pending().past_expiry().count() == ROWS

    _, sample_peak, _ = traced(lambda: list(PausedRun.objects.all()[:SAMPLE]))
    all_rows_estimate = sample_peak * ROWS // SAMPLE

    result, peak, seconds = traced(sweep)

    assert result.expired_pauses == ROWS
    assert PausedRun.objects.filter(status="expired").count() == ROWS
    assert Event.objects.filter(kind="pause.expired").count() == ROWS
    mib = 1024 * 1024
    print(
        f"\n[{connection.vendor}] sweep of {ROWS:,} expired pauses (batches of 1,000, one event each): "
        f"{seconds:.1f} s under tracemalloc, peak {peak / mib:.1f} MiB; "
        f"loading every row would take about {all_rows_estimate / mib:.0f} MiB "
        f"({sample_peak / mib:.1f} MiB measured for {SAMPLE:,})"
    )
    assert peak * 10 < all_rows_estimate
