"""Reading a page's fixed statement: its rows as Django reads them, at C speed, on a
plan made once per connection where one plan serves every caller."""

from typing import Any

from agentstate.db import cursor, prepares

# Sent just before a page's statement, in the same pipeline; ``true`` makes each
# setting last until the pipeline's Sync ends the implicit transaction of the two, so
# that the page alone runs on them: a generic plan, made without the caller's values,
# and none of the two ways a plan that guesses how many rows a caller sees could read
# every row of others: a sequential scan (for the count), or an index in the page's
# time order whose rows are filtered and the ties sorted (an incremental sort), where
# the caller's own index gives the rows in order, ids included
# (tests/backends/test_page_plans.py).
GENERIC_PLAN = (
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', true),"
    " set_config('enable_seqscan', 'off', true),"
    " set_config('enable_incremental_sort', 'off', true)"
)


def page_rows(connection: Any, statement: str, params: Any, *, generic: bool) -> list[Any]:
    """Every row of a page's fixed ``statement`` (``reading_cursor``).

    ``generic``: the caller's rows come in the page's order, ids included, from an
    index whose leading columns the statement fixes to the caller (and the status),
    and are counted from it. PostgreSQL would otherwise plan the statement again at
    every call, prepared or not (0.5 to 1.3 ms a page on the bench's machine, as much
    as reading it): its ``LIMIT`` and ``OFFSET`` are parameters, which a generic
    plan must guess, so the plan cache keeps choosing a custom plan. Where the
    connection prepares statements (``prepares``) and is in autocommit, the page
    goes in one pipeline after ``GENERIC_PLAN``: one round trip, planned once per
    connection. Elsewhere (a pooler that keeps no prepared statement; a caller's
    transaction, which the settings would outlast) it is planned at every call.
    """
    with reading_cursor(connection) as c:
        if generic and _generic_plans(connection):
            with connection.wrap_database_errors, c.cursor.connection.pipeline():
                c.execute(GENERIC_PLAN)
                c.execute(statement, params)
                return list(c.fetchall())
        c.execute(statement, params)
        return list(c.fetchall())


def _generic_plans(connection: Any) -> bool:
    # in a transaction (an atomic block, autocommit turned off) the settings would
    # last until it ends
    if not connection.get_autocommit() or not prepares(connection):
        return False
    from psycopg import Pipeline

    return bool(Pipeline.is_supported())


def reading_cursor(connection: Any) -> Any:
    """``db.cursor(connection)``, whose ``timestamptz`` columns psycopg's own loader
    reads (its C one, with ``psycopg[binary]``) wherever it gives what Django's does.

    Django reads them through a loader of its own, a subclass of psycopg's pure
    Python one that sets Django's time zone on each time: a few µs a time, most of
    reading a page (20 pauses: 147 µs so, 12 µs by psycopg's C loader, on the
    bench's machine). psycopg's loader gives each time in the session's
    ``TimeZone``, Django's the same time with ``connection.timezone``: where both
    are the same zone (with ``USE_TZ``, Django sets the session's zone to it), the
    values are the same, ``tzinfo`` included; elsewhere (no ``USE_TZ``: naive times)
    Django's loader is kept.
    """
    c = cursor(connection)
    raw = c.cursor
    adapters = getattr(raw, "adapters", None)  # psycopg 3
    if adapters is not None:
        from psycopg.postgres import types
        from psycopg.pq import Format
        from psycopg.types.datetime import TimestamptzLoader

        django_loader = adapters.get_loader(types["timestamptz"].oid, Format.TEXT)
        zone = getattr(django_loader, "timezone", None)  # Django's BaseTzLoader's
        if zone is not None and zone == raw.connection.info.timezone:
            adapters.register_loader("timestamptz", TimestamptzLoader)
    return c
