"""On PostgreSQL a read by key reads its own rows, however many others there are.

A function's statements keep one generic plan (``plan_cache_mode``); written as
one ``WHERE`` with ``p IS NULL OR column = p``, that plan cannot look the key up
in the index and reads every row around it. Each test counts the rows a read
fetched from the table (``pg_stat_xact_user_tables``) among thousands of others.
"""

import pytest

from agentstate.services import context

from .test_sweep_plans import execute, rows_read

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]

OTHERS = 5_000
FETCHED = "coalesce(idx_tup_fetch, 0) + seq_tup_read"


def fetched(table: str, sql: str, params=()) -> int:
    """The rows of ``table`` that ``sql`` fetched."""
    before = rows_read(table, column=FETCHED).get(table, 0)
    execute(sql, params)
    return rows_read(table, column=FETCHED)[table] - before


def test_a_get_of_some_names_reads_those_variables_only():
    context.put("big", "x", 1)
    execute(
        "INSERT INTO agentstate_variable (scope_id, name, is_list, value, head, tail, version,"
        " updated_at, updated_by) SELECT (SELECT id FROM agentstate_scope WHERE key = 'big'),"
        " 'v' || i, false, to_jsonb(i), 0, 0, 1, now(), '' FROM generate_series(1, %s) AS i",
        [OTHERS],
    )
    execute("ANALYZE agentstate_variable")
    assert context.get("big", ["v77", "x"]) == {"v77": 77, "x": 1}
    read = fetched(
        "agentstate_variable", "SELECT agentstate_get('big', ARRAY['v77', 'x'], NULL, NULL)"
    )
    assert read <= 2, read  # it read all 5,001 as one OR
    assert len(context.get("big")) == OTHERS + 1
