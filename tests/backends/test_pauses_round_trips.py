"""On PostgreSQL each pause operation, and each batch of the sweep, is one round trip.

In autocommit (``transaction=True``), so that no savepoint is counted: the
one statement is the call of the operation's function. Over REST a request
costs the token lookup (which reads the caller's permissions too) and that
call, whatever the caller's reach.
"""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentstate.backends import backend
from agentstate.exceptions import AlreadyClaimed, NotPending, PauseNotFound
from agentstate.models import ApprovalRequest, Event, PausedRun, Run
from agentstate.services import pauses
from agentstate.services.sweep import sweep
from tests.conftest import is_token_lookup

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]


def calls(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries]


def one_call(queries: CaptureQueriesContext, function: str) -> bool:
    (sql,) = calls(queries)
    assert sql.startswith(f"SELECT agentstate_{function}("), sql
    return True


def test_a_first_put_and_a_replacing_put_are_one_call_each():
    for _ in range(2):
        with CaptureQueriesContext(connection) as queries:
            pauses.put("chat", "call", "alice", {"step": 1})
        assert one_call(queries, "put_pause")
    assert list(Event.objects.values_list("kind", flat=True)) == ["pause.created"] * 2


def test_a_claim_and_a_refused_claim_are_one_call_each():
    question = pauses.put("chat", "call", "alice", None)
    with CaptureQueriesContext(connection) as queries:
        pauses.claim("chat", "call", "alice", question)
    assert one_call(queries, "claim")
    with CaptureQueriesContext(connection) as queries, pytest.raises(AlreadyClaimed):
        pauses.claim("chat", "call", "alice", question)
    assert one_call(queries, "claim")


def test_resolve_and_cancel_are_one_call_each():
    pauses.claim("chat", "call", "alice", pauses.put("chat", "call", "alice", None))
    with CaptureQueriesContext(connection) as queries:
        pauses.resolve("chat", "call")
    assert one_call(queries, "resolve")
    pauses.put("chat", "other", "alice", None)
    with CaptureQueriesContext(connection) as queries:
        pauses.cancel("chat", "other")
    assert one_call(queries, "cancel")
    with CaptureQueriesContext(connection) as queries, pytest.raises(PauseNotFound):
        pauses.cancel("chat", "other")
    assert one_call(queries, "cancel")


def test_a_refused_call_leaves_nothing_written():
    pauses.claim("chat", "call", "alice", pauses.put("chat", "call", "alice", None))
    before = list(PausedRun.objects.values()), Event.objects.count()
    with pytest.raises(NotPending):
        pauses.cancel("chat", "call")
    assert (list(PausedRun.objects.values()), Event.objects.count()) == before


def test_each_batch_of_the_sweep_is_one_call():
    for i in range(5):
        pauses.put("chat", f"due-{i}", "alice", None)
    PausedRun.objects.update(expires_at=Now() - timedelta(seconds=1))
    with CaptureQueriesContext(connection) as queries:
        assert sweep(batch_size=2).expired_pauses == 5
    # 2 + 2 + 1 pauses, then one call each that finds no request past the TTL, no
    # request at a deadline, no old pause, no old event, no expired LangGraph store
    # item (threads are kept: THREAD_TTL is unset)
    assert [sql.split("(")[0] for sql in calls(queries)] == [
        "SELECT agentstate_expire_pauses",
        "SELECT agentstate_expire_pauses",
        "SELECT agentstate_expire_pauses",
        "SELECT agentstate_expire_approval_requests",
        "SELECT agentstate_apply_deadlines",
        "SELECT agentstate_purge_pauses",
        "SELECT agentstate_purge_events",
        "SELECT agentstate_purge_store_items",
    ]


@pytest.mark.parametrize(
    "operation, function",
    [
        ("expire_pauses", "expire_pauses"),
        ("expire_approval_requests", "expire_approval_requests"),
        ("purge_pauses", "purge_pauses"),
    ],
)
def test_a_sweep_batch_with_rows_to_change_is_one_call(operation, function):
    run = Run.objects.create(run_id="run-1")
    ApprovalRequest.objects.create(run=run, tool_name="shell", call_id="c")
    ApprovalRequest.objects.update(created_at=Now() - timedelta(days=2))
    pauses.put("chat", "call", "alice", None)
    PausedRun.objects.update(expires_at=Now() - timedelta(days=40))
    if operation == "purge_pauses":
        PausedRun.objects.update(status="expired")
    args = {"expire_approval_requests": (timedelta(days=1),), "purge_pauses": (timedelta(days=30),)}
    with CaptureQueriesContext(connection) as queries:
        result = getattr(backend(), operation)(10, *args.get(operation, ()))
    assert one_call(queries, function)
    assert (result if isinstance(result, int) else result.value) == 1


@pytest.fixture
def by_token():
    def client(user) -> APIClient:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
        return api

    return client


@pytest.mark.parametrize("perms", [(), ("agentstate.change_pausedrun",)])
def test_each_pause_request_is_the_token_lookup_and_one_call(by_token, make_user, perms):
    api = by_token(make_user("alice", *perms))
    key = {"chat_id": "chat", "tool_call_id": "call"}

    def request(path: str, function: str, body: dict, status: int) -> dict:
        with CaptureQueriesContext(connection) as queries:
            response = api.post(f"/api/pauses/{path}", body, format="json")
        assert response.status_code == status, response.content
        token, call = calls(queries)
        assert is_token_lookup(token) and call.startswith(f"SELECT agentstate_{function}(")
        return response.json() if response.content else {}

    created = request("", "put_pause", {**key, "owner": "alice", "payload": {"v": 1}}, 201)
    assert (created["status"], created["payload"], created["owner"]) == (
        "pending",
        {"v": 1},
        "alice",
    )
    claimed = request("claim/", "claim", {**key, "question_id": created["question_id"]}, 200)
    assert (claimed["status"], claimed["claimed_by"]) == ("claimed", "alice")
    resolved = request("resolve/", "resolve", key, 200)
    assert resolved["status"] == "resolved" and resolved["resolved_at"] is not None
    request("", "put_pause", {**key, "owner": "alice", "payload": None}, 201)
    request("cancel/", "cancel", key, 204)
    request("cancel/", "cancel", key, 404)


@pytest.mark.parametrize("perms", [(), ("agentstate.view_pausedrun",)])
@pytest.mark.parametrize(
    "query", ["", "?status=expired", "?owner=alice&chat_id=chat&page_size=1", "?page=2&page_size=1"]
)
def test_a_page_of_pauses_is_the_token_lookup_and_one_statement(by_token, make_user, perms, query):
    api = by_token(make_user("alice", *perms))
    pauses.put("chat", "a", "alice", {"v": 1})
    pauses.put("chat", "b", "bob", None)
    pauses.put("chat", "c", "alice", None)
    PausedRun.objects.filter(tool_call_id="c").update(expires_at=Now() - timedelta(seconds=1))
    with CaptureQueriesContext(connection) as queries:
        response = api.get(f"/api/pauses/{query}")
    assert response.status_code == 200, response.content
    token, page = calls(queries)
    assert is_token_lookup(token), token
    # the page's statement: the pauses' columns (no row as JSON), from their table
    assert page.startswith("SELECT p.") and "to_jsonb" not in page, page
    assert f" FROM {PausedRun._meta.db_table} p" in page, page
    assert response.json()["count"] >= 1
