"""A database function's call goes straight to the driver's cursor unless Django's
wrapper has someone listening: the query log and execute wrappers still see every
statement, errors come as Django's, and a call from async code is refused as
Django refuses any query there."""

import asyncio

import pytest
from django.core.exceptions import SynchronousOnlyOperation
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from agentstate.db import call
from agentstate.exceptions import ScopeNotFound
from agentstate.services import context

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]


def test_the_query_log_sees_a_call():
    with CaptureQueriesContext(connection) as captured:
        context.put("driver-path", "v", 1)
    assert [q["sql"] for q in captured.captured_queries if "agentstate_put" in q["sql"]]


def test_an_execute_wrapper_sees_a_call():
    seen = []

    def wrapper(execute, sql, params, many, context_):
        seen.append(sql)
        return execute(sql, params, many, context_)

    with connection.execute_wrapper(wrapper):
        context.put("driver-path", "v", 1)
    assert any("agentstate_put" in sql for sql in seen)


def test_a_refusal_and_an_error_come_as_before_and_leave_the_connection_usable():
    with pytest.raises(ScopeNotFound):
        context.get("driver-path-none", ["v"])
    with pytest.raises(DatabaseError):
        call("default", "agentstate_no_such_function")
    context.put("driver-path", "v", 2)
    assert context.get("driver-path", ["v"]) == {"v": 2}


def test_a_call_from_async_code_is_refused():
    async def inside_a_loop() -> None:
        context.put("driver-path", "v", 3)

    with pytest.raises(SynchronousOnlyOperation):
        asyncio.run(inside_a_loop())


def test_a_tool_that_patched_django_s_cursor_wrapper_sees_a_call(monkeypatch):
    from django.db.backends.utils import CursorWrapper

    seen = []
    execute = CursorWrapper.execute

    def patched(self, sql, params=None):
        seen.append(sql)
        return execute(self, sql, params)

    monkeypatch.setattr(CursorWrapper, "execute", patched)
    context.put("driver-path", "v", 4)
    assert any("agentstate_put" in sql for sql in seen)


def test_a_checkpoint_reads_the_same_in_binary_and_through_the_wrapper(monkeypatch):
    """A set-returning call (``call_row``) reads its row in binary form on the
    driver's cursor and as text through Django's wrapper; the saver gets the same
    checkpoint either way: its values (a chain of bases), its writes, its JSON."""
    from agentstate.contrib.langgraph import AgentStateSaver
    from agentstate.db import _driver_cursor, _kept_cursor

    saver = AgentStateSaver()
    config = {"configurable": {"thread_id": "driver-path-read", "checkpoint_ns": ""}}
    for step in range(3):
        checkpoint = {
            "v": 4,
            "id": f"1ef0000{step}-0000-6000-8000-000000000000",
            "ts": "2026-12-05T00:00:00+00:00",
            "channel_values": {"messages": ["a" * 60] * (step + 1), "step": step, "x": b"\0"},
            "channel_versions": {"messages": f"{step + 1}", "step": f"{step + 1}", "x": "1"},
            "versions_seen": {},
            "updated_channels": None,
        }
        config = saver.put(config, checkpoint, {"step": step}, checkpoint["channel_versions"])
    saver.put_writes(config, [("messages", ["w" * 60]), ("step", 9)], "task-1", "path")
    binary = []
    made = []  # the cursors made (a kept one's, or the wrapper's)
    kept_cursor, driver_cursor = _kept_cursor, _driver_cursor

    def kept(connection, binding):
        binary.append(binding)
        return kept_cursor(connection, binding)

    def new(connection, binding=False):
        made.append(binding)
        return driver_cursor(connection, binding)

    monkeypatch.setattr("agentstate.db._kept_cursor", kept)
    monkeypatch.setattr("agentstate.db._driver_cursor", new)
    direct = saver.get_tuple(config)
    assert binary == [True]
    made.clear()
    with CaptureQueriesContext(connection) as captured:
        wrapped = saver.get_tuple(config)
    assert [q for q in captured.captured_queries if "agentstate_checkpoint" in q["sql"]]
    assert binary == [True]  # not the driver's cursor kept for the direct path
    assert True not in made  # Django's cursor (of a preparing connection, or its own)
    assert direct == wrapped
    assert direct is not None
    assert direct.checkpoint["channel_values"]["messages"] == ["a" * 60] * 3
    assert direct.checkpoint["channel_values"]["x"] == b"\0"
    assert [(t, c) for t, c, _ in direct.pending_writes] == [
        ("task-1", "messages"),
        ("task-1", "step"),
    ]


@pytest.fixture
def no_kept_cursors():
    """The default connection keeps no driver cursor from an earlier test (a saver's
    binary read, say: on a connection that does not prepare, a kind of its own)."""
    from django.db import connections

    from agentstate.db import _KEPT

    for entry in connections["default"].__dict__.pop(_KEPT, {}).values():
        entry[3].close()


def _kept() -> dict:
    """The driver cursors the default connection keeps, by kind."""
    from django.db import connections

    from agentstate.db import _KEPT

    kept = connections["default"].__dict__.get(_KEPT, {})
    return {kind: entry[3] for kind, entry in kept.items()}


def test_a_call_reuses_the_driver_s_cursor_of_the_last_call(no_kept_cursors):
    context.put("driver-path", "v", 5)
    (cursor,) = _kept().values()
    context.put("driver-path", "v", 6)
    assert context.get("driver-path", ["v"]) == {"v": 6}
    assert list(_kept().values()) == [cursor]
    assert not cursor.closed


def test_a_call_after_a_reconnect_gets_a_cursor_of_the_new_connection(no_kept_cursors):
    context.put("driver-path", "v", 7)
    (old,) = _kept().values()
    connection.close()
    assert old.connection.closed
    context.put("driver-path", "v", 8)
    (new,) = _kept().values()
    assert new is not old
    assert new.connection is connection.connection


@pytest.mark.direct_only
def test_a_call_after_the_server_dropped_the_connection_reconnects(no_kept_cursors):
    """The backend ended under a kept cursor (a database restarted): the next call
    fails as before, its cursor dropped; once Django closes the broken connection
    (at the end of a request), a call runs on a new connection and cursor. (Behind
    a pooler the client's connection outlives the server's, and a connection through
    it may be handed the very backend it ends: tests/faults/test_outage.py has that
    case.)"""
    import psycopg
    from django.db import OperationalError

    context.put("driver-path", "v", 9)
    (old,) = _kept().values()
    with connection.cursor() as c:
        c.execute("SELECT pg_backend_pid()")
        (pid,) = c.fetchone()
    settings = connection.get_connection_params()
    with psycopg.connect(autocommit=True, **settings) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    with pytest.raises(OperationalError):
        context.get("driver-path", ["v"])
    assert old.closed
    assert old not in _kept().values()
    connection.close_if_unusable_or_obsolete()
    assert context.get("driver-path", ["v"]) == {"v": 9}
    (new,) = _kept().values()
    assert new.connection is connection.connection


def test_an_error_drops_the_cursor_it_ran_on(no_kept_cursors):
    context.put("driver-path", "v", 10)
    (old,) = _kept().values()
    with pytest.raises(DatabaseError):
        call("default", "agentstate_no_such_function")
    assert old.closed
    assert old not in _kept().values()
    assert context.get("driver-path", ["v"]) == {"v": 10}


def test_a_connection_shared_between_threads_keeps_a_cursor_per_thread(no_kept_cursors):
    """A thread that runs a call on another thread's connection (shared on purpose, as
    the LangGraph saver lends its connections) gets a cursor of its own."""
    import threading

    from django.db import connections

    context.put("driver-path", "v", 11)
    (mine,) = _kept().values()
    wrapper = connections["default"]
    seen = []

    def elsewhere() -> None:
        connections["default"] = wrapper
        try:
            seen.append(context.get("driver-path", ["v"]))
            seen.extend(_kept().values())
        finally:
            del connections["default"]

    wrapper.inc_thread_sharing()
    try:
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    finally:
        wrapper.dec_thread_sharing()
    assert seen[0] == {"v": 11}
    assert seen[1] is not mine
    assert context.get("driver-path", ["v"]) == {"v": 11}
    (again,) = _kept().values()
    assert again is not seen[1]
