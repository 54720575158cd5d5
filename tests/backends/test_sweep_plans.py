"""On PostgreSQL each batch of the sweep reads its own rows by key, never the whole
table it changes.

A batch is a statement whose first part picks at most a batch of ids. Joined to the
table with ``USING batch`` (or ``FROM batch``), the planner chose a hash join over a
sequential scan of the whole table wherever that table was not much larger than a
batch, so that each batch read every row again and the sweep grew with the square
of its backlog (100,000 events past retention: a batch 20 ms, 18 of them reading
the table). Each batch now changes its rows by their ids (``= ANY`` of an array: an
index lookup each), as the expiry of pauses does.

Each test fills a table with rows the sweep keeps beside the rows it removes, then
counts the rows the sweep's statements read by sequential scans of each table
(``pg_stat_xact_user_tables``): fewer than the table holds means no batch read it
whole.

The store's expired items have no index (their expiry is in their JSON): a batch
finds them by reading the items, from where the last batch ended, so that a sweep
reads each item once (from the first item each time, it read every item that is
not expired again for every batch).
"""

from datetime import timedelta

import pytest
from django.db import connection

from agentstate.backends import backend
from agentstate.models import Variable
from agentstate.services.sweep import apply_deadlines, sweep
from agentstate.types import STORE_PREFIX

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]

KEPT = 20_000  # rows of each table the sweep leaves alone
SWEPT = 3_000  # rows it removes or expires: three batches
OLD = "now() - interval '400 days'"


def execute(sql: str, params=()) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def rows_read(*tables: str, column: str = "seq_tup_read") -> dict[str, int]:
    """This transaction's rows read of ``tables``, by table, as ``column`` of
    ``pg_stat_xact_user_tables`` counts them (by default: by sequential scans)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT relname, {column} FROM pg_stat_xact_user_tables WHERE relname = ANY(%s)",
            [list(tables)],
        )
        return dict(cursor.fetchall())


def swept(*tables: str, column: str = "seq_tup_read") -> dict[str, int]:
    """The statistics of ``tables`` made (the planner then knows their size), the
    sweep run in batches of 1,000: the rows it read of each table (``column``)."""
    for table in tables:
        execute(f"ANALYZE {table}")
    before = rows_read(*tables, column=column)
    sweep(batch_size=1000)
    after = rows_read(*tables, column=column)
    return {table: after.get(table, 0) - before.get(table, 0) for table in tables}


def events(count: int, created_at: str) -> None:
    execute(
        "INSERT INTO agentstate_event (kind, actor, object_type, object_id, owner, details,"
        f" created_at) SELECT 'context.put', 'test', 'variable', 'v/' || i, '', '{{}}', {created_at}"
        " FROM generate_series(1, %s) AS i",
        [count],
    )


def test_each_batch_of_events_past_retention_reads_its_own_rows(settings):
    settings.AGENTSTATE = {"EVENT_RETENTION": timedelta(days=30)}
    events(KEPT, "now()")
    events(SWEPT, OLD)
    read = swept("agentstate_event", "agentstate_delivery", "agentstate_deliveryattempt")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM agentstate_event")
        assert cursor.fetchone() == (KEPT,)
    assert read["agentstate_event"] < KEPT, read


def pauses(count: int, status: str, resolved_at: str) -> None:
    execute(
        "INSERT INTO agentstate_pausedrun (chat_id, tool_call_id, owner, question_id, status,"
        " payload, created_at, expires_at, claimed_at, resolved_at, claimed_by)"
        " SELECT 'chat', %s || i, 'alice', gen_random_uuid(), %s, '{}', now(),"
        f" now() + interval '1 day', now(), {resolved_at}, ''"
        " FROM generate_series(1, %s) AS i",
        [status, status, count],
    )


def test_each_batch_of_pauses_past_retention_reads_its_own_rows(settings):
    settings.AGENTSTATE = {"RETENTION": timedelta(days=30)}
    pauses(KEPT, "claimed", "NULL")
    pauses(SWEPT, "resolved", OLD)
    assert swept("agentstate_pausedrun")["agentstate_pausedrun"] < KEPT


def test_each_batch_of_approval_requests_expired_reads_its_own_rows(settings):
    settings.AGENTSTATE = {"APPROVAL_TTL": timedelta(hours=1)}
    execute(
        "INSERT INTO agentstate_run (run_id, context, requests, input_tokens, output_tokens,"
        " total_tokens, cached_tokens, reasoning_tokens, created_at, updated_at)"
        " SELECT 'run-' || i, '{}', 0, 0, 0, 0, 0, 0, now(), now()"
        " FROM generate_series(1, %s) AS i",
        [KEPT],
    )
    for status, count, created_at in (("approved", KEPT, "now()"), ("pending", SWEPT, OLD)):
        execute(
            "INSERT INTO agentstate_approvalrequest (run_id, tool_name, call_id, status,"
            " always, reason, decided_at, created_at)"
            " SELECT (SELECT min(id) FROM agentstate_run) + i %% %s, 'shell', %s || i, %s,"
            f" false, '', CASE WHEN %s = 'approved' THEN now() END, {created_at}"
            " FROM generate_series(1, %s) AS i",
            [KEPT, status, status, status, count],
        )
    read = swept("agentstate_approvalrequest", "agentstate_run")
    assert read["agentstate_approvalrequest"] < KEPT, read
    assert read["agentstate_run"] < KEPT, read


def test_each_batch_of_threads_past_their_ttl_reads_its_own_rows(settings):
    settings.AGENTSTATE = {"THREAD_TTL": timedelta(days=1)}
    for prefix, count, at in (("kept-", KEPT, "now()"), ("old-", SWEPT, OLD)):
        execute(
            "INSERT INTO agentstate_thread (thread_id, created_at, updated_at)"
            f" SELECT %s || i, {at}, {at} FROM generate_series(1, %s) AS i",
            [prefix, count],
        )
    execute(
        "INSERT INTO agentstate_checkpoint (thread_id, checkpoint_ns, checkpoint_id, checkpoint,"
        " metadata, forked, created_at) SELECT id, '', 'c', '{}', '{}', false, now()"
        " FROM agentstate_thread"
    )
    tables = ("agentstate_thread", "agentstate_checkpoint")
    read = swept(*tables, "agentstate_checkpointblob", "agentstate_checkpointwrite")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM agentstate_checkpoint")
        assert cursor.fetchone() == (KEPT,)
    for table in tables:
        assert read[table] < KEPT, read


def test_a_sweep_reads_each_store_item_once():
    execute(
        "INSERT INTO agentstate_scope (key, created_at) VALUES (%s, now())", [STORE_PREFIX + "ns"]
    )
    # SWEPT expired items among KEPT others, spread through the scope by name
    execute(
        "INSERT INTO agentstate_variable (scope_id, name, is_list, value, head, tail, version,"
        " updated_at, updated_by) SELECT (SELECT max(id) FROM agentstate_scope),"
        " 'item-' || lpad(i::text, 6, '0'), false,"
        " jsonb_build_object('value', i, 'expires_at', CASE WHEN i %% %s < %s THEN 1 ELSE 9e12 END),"
        " 0, 0, 1, now(), '' FROM generate_series(1, %s) AS i",
        [(KEPT + SWEPT) // 1000, SWEPT // 1000, KEPT + SWEPT],  # 3 in every 23
    )
    before = Variable.objects.count()
    fetched = swept("agentstate_variable", column="coalesce(idx_tup_fetch, 0) + seq_tup_read")
    assert before - Variable.objects.count() == SWEPT
    assert fetched["agentstate_variable"] < 1.5 * before, fetched


def test_a_sweep_reads_each_approval_deadline_once():
    """Requests reminded by a batch stay pending before the next batch's: each batch
    goes on from where the last ended rather than reading them again."""
    due = 2_000
    execute(
        "INSERT INTO agentstate_run (run_id, context, requests, input_tokens, output_tokens,"
        " total_tokens, cached_tokens, reasoning_tokens, created_at, updated_at)"
        " SELECT 'run-' || i, '{}', 0, 0, 0, 0, 0, 0, now(), now()"
        " FROM generate_series(1, %s) AS i",
        [due],
    )
    # due for their reminder, their deadlines a day away
    execute(
        "INSERT INTO agentstate_approvalrequest (run_id, tool_name, call_id, status, always,"
        " reason, created_at, deadline, remind_at, on_deadline, approvals_required)"
        " SELECT id, 'shell', 'call-' || id, 'pending', false, '', now(),"
        " now() + interval '1 day' + id * interval '1 second', now() - interval '1 minute',"
        " 'expire', 1 FROM agentstate_run",
    )
    execute("ANALYZE agentstate_approvalrequest")
    column = "coalesce(idx_tup_fetch, 0) + seq_tup_read"
    before = rows_read("agentstate_approvalrequest", column=column)
    apply_deadlines(backend(), 100)
    after = rows_read("agentstate_approvalrequest", column=column)
    fetched = after["agentstate_approvalrequest"] - before.get("agentstate_approvalrequest", 0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM agentstate_event WHERE kind = 'approval.expiring'")
        assert cursor.fetchone() == (due,)
    # Each request read three times: found, locked, updated (6,039). Twenty batches
    # each from the first read the requests reminded before them again: 29,019.
    assert fetched < 4 * due, fetched
