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
