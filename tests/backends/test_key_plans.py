"""On PostgreSQL an operation's function reads its tables by key even when its
plans were made while they were empty.

PL/pgSQL keeps a plan per statement and connection (a generic one: ``SET
plan_cache_mode``). Planned over an empty table, a lookup by key is a
sequential scan, and the connection would keep scanning the whole table as it
grew, until the table's statistics changed again. The functions set
``enable_seqscan = off`` (migration ``0021_key_plans``), so their plans use the
keys' indexes whatever the table held when they were made.
"""

import pytest
from django.db import connection
from langgraph.checkpoint.base import empty_checkpoint

from agentstate.contrib.langgraph import AgentStateSaver, AgentStateStore
from agentstate.services import context, pauses

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]

TABLES = (
    "agentstate_thread",
    "agentstate_checkpoint",
    "agentstate_checkpointwrite",
    "agentstate_scope",
    "agentstate_variable",
    "agentstate_pausedrun",
)
IDS = [f"1f0b0000-0000-6000-8000-00000000000{n}" for n in range(1, 4)]


def sequential_scans() -> dict[str, int]:
    """This transaction's sequential scans of ``TABLES``, by table."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, seq_scan FROM pg_stat_xact_user_tables WHERE relname = ANY(%s)",
            [list(TABLES)],
        )
        return {name: scans for name, scans in cursor.fetchall() if scans}


@pytest.fixture
def empty_statistics() -> dict[str, int]:
    """The tables' statistics say they are empty (which drops the plans made over
    them), so the next plans are made over empty tables; answers their scans so
    far (the check that each is empty scanned it)."""
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"SELECT count(*) FROM {table}")
            assert cursor.fetchone() == (0,), f"{table} is not empty"
            cursor.execute(f"ANALYZE {table}")
    return sequential_scans()


def test_the_savers_calls_planned_over_empty_tables_scan_none(empty_statistics):
    saver = AgentStateSaver()
    config = {"configurable": {"thread_id": "planned-empty", "checkpoint_ns": ""}}
    for step, checkpoint_id in enumerate(IDS):
        checkpoint = {**empty_checkpoint(), "id": checkpoint_id}
        checkpoint["channel_values"] = {"messages": ["m"] * (step + 1)}
        checkpoint["channel_versions"] = {"messages": f"{step + 1:032}"}
        ahead = {"configurable": {**config["configurable"], "checkpoint_id": checkpoint_id}}
        saver.put_writes(ahead, [("messages", ["w"])], f"task-{step}")  # before its put
        config = saver.put(config, checkpoint, {"step": step}, {"messages": f"{step + 1:032}"})
    found = saver.get_tuple(config)
    assert found is not None and found.checkpoint["id"] == IDS[-1]
    assert found.checkpoint["channel_values"] == {"messages": ["m"] * 3}
    assert found.pending_writes == [("task-2", "messages", ["w"])]
    assert sequential_scans() == empty_statistics


def test_context_pauses_and_the_store_planned_over_empty_tables_scan_none(empty_statistics):
    context.put("planned", "v", 1)
    context.put("planned", "v", 2)
    assert context.get("planned", ["v"]) == {"v": 2}
    store = AgentStateStore()
    store.put(("planned",), "item", {"n": 1})
    assert store.get(("planned",), "item").value == {"n": 1}
    question = pauses.put("chat", "call", "alice", {"step": 1})
    pauses.claim("chat", "call", "alice", question)
    assert sequential_scans() == empty_statistics


def test_each_function_without_sequential_scans_is_never_compiled():
    """A scan left as a statement's only path (a table without a usable index, such
    as the webhooks' ``active`` check of the outbox) is costed past
    ``jit_above_cost``: without ``jit = off`` it would be compiled at every call."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT proname, proconfig FROM pg_proc"
            " WHERE proname LIKE 'agentstate%%' AND 'enable_seqscan=off' = ANY(proconfig)"
        )
        found = dict(cursor.fetchall())
    assert len(found) >= 30
    assert {name for name, config in found.items() if "jit=off" not in config} == set()
