"""What one call costs the database: its statements and its round trips.

``statements``: the SQL Django ran (``CaptureQueriesContext``), what Django
code sees. ``round trips``: the requests the client waited on, read from
libpq's own trace of the connection's protocol messages (one
``ReadyForQuery`` from the server ends each), so a ``BEGIN`` or ``COMMIT``
that Django issues without logging it counts too. On MySQL and MariaDB: the
statements the server received from this session (its ``Questions``
counter), the ``SET autocommit`` and ``COMMIT`` that mysqlclient sends for
Django's transactions included. Both around one call, in
this process, after one untimed call (a first call's one-time lookups, such
as a content type, are not the operation's cost).
"""

import os
import tempfile
from collections.abc import Callable
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from psycopg import pq


def _questions() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Questions'")
        return int(cursor.fetchone()[1])


def _round_trips_of(call: Callable[[], Any]) -> tuple[Any, int]:
    connection.ensure_connection()
    if connection.vendor == "mysql":
        before = _questions()
        result = call()
        # the second SHOW counts itself
        return result, _questions() - before - 1
    pgconn = connection.connection.pgconn
    with tempfile.TemporaryFile("w+") as log:
        # libpq writes through a stream of its own on a duplicate descriptor
        pgconn.trace(os.dup(log.fileno()))
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            result = call()
        finally:
            pgconn.untrace()
        log.seek(0)
        trips = sum(1 for line in log if line.split("\t")[:1] == ["B"] and "ReadyForQuery" in line)
    return result, trips


def of(call: Callable[[], Any]) -> dict[str, Any]:
    """``call()``'s statements and round trips on the default connection, and its result."""
    queries = CaptureQueriesContext(connection)

    def captured() -> Any:
        with queries:
            return call()

    # the statements that count the round trips are not the call's
    result, trips = _round_trips_of(captured)
    return {"statements": len(queries), "round_trips": trips, "result": result}
