"""The REST client against a live server: context variables, scopes, auth, errors, retries.

The server is pytest-django's ``live_server`` on the configured database;
the client talks to it over real HTTP with token or basic auth.
"""

import httpx
import pytest
from conftest import closed_port

from agentstate_client import (
    AgentStateClient,
    BodyTooLarge,
    InvalidInput,
    NotAuthenticated,
    PermissionDenied,
    RemoteSharedState,
    RemoteToolContext,
    ScopeNotFound,
    ServiceUnavailable,
    TypeConflict,
    Unreachable,
    VariableNotFound,
    VersionMismatch,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_put_get_push_pop_delete_round_trip(ac):
    assert ac.put("s", "plan", {"step": 1}) == {
        "scope": "s",
        "name": "plan",
        "value": {"step": 1},
        "version": 1,
    }
    assert ac.push("s", "todo", "a") == {"scope": "s", "name": "todo", "length": 1, "version": 1}
    assert ac.push("s", "todo", "b")["length"] == 2
    assert ac.get("s", ["plan", "todo", "missing"]) == {
        "plan": {"step": 1},
        "todo": ["a", "b"],
        "missing": None,
    }
    assert ac.pop("s", "todo", "fifo") == "a"
    assert ac.get("s") == {"plan": {"step": 1}, "todo": "b"}
    ac.delete("s", "plan")
    assert ac.get("s", ["plan"]) == {"plan": None}


def test_get_list_reads_the_last_elements_and_the_length(ac):
    for item in ("a", {"b": 2}, None, "d"):
        ac.push("s", "log", item)
    assert ac.get_list("s", "log", last=2) == {
        "scope": "s",
        "name": "log",
        "values": [None, "d"],
        "length": 4,
    }
    assert ac.get_list("s", "log")["values"] == ["a", {"b": 2}, None, "d"]
    ac.put("s", "text", "t")
    assert ac.get_list("s", "text", last=5)["values"] == ["t"]
    ac.put("s", "n", 1)
    with pytest.raises(TypeConflict):
        ac.get_list("s", "n")
    with pytest.raises(VariableNotFound):
        ac.get_list("s", "missing")
    with pytest.raises(ScopeNotFound):
        ac.get_list("nope", "log")
    with pytest.raises(InvalidInput) as caught:
        ac.get_list("s", "log", last=0)
    assert (caught.value.status, caught.value.field) == (400, "last")


def test_put_stores_null_and_if_version_guards(ac):
    assert ac.put("s", "x", None, if_version=0)["version"] == 1
    assert ac.put("s", "x", 5, if_version=1)["version"] == 2
    with pytest.raises(VersionMismatch) as caught:
        ac.put("s", "x", 6, if_version=1)
    assert (caught.value.status, caught.value.code) == (412, "version_mismatch")
    assert ac.get("s", ["x"]) == {"x": 5}


def test_missing_scope_and_variable_raise_distinct_errors(ac):
    for call in (
        lambda: ac.get("nope"),
        lambda: ac.delete("nope", "x"),
        lambda: ac.pop("nope", "x"),
        lambda: ac.delete_scope("nope"),
    ):
        with pytest.raises(ScopeNotFound) as caught:
            call()
        assert caught.value.code == "scope_not_found"
    ac.put("s", "other", 1)
    for call in (lambda: ac.delete("s", "x"), lambda: ac.pop("s", "x")):
        with pytest.raises(VariableNotFound) as caught:
            call()


def test_type_conflicts_change_nothing(ac):
    ac.put("s", "n", 5)
    with pytest.raises(TypeConflict) as caught:
        ac.push("s", "n", 1)
    assert (caught.value.status, caught.value.code) == (409, "type_conflict")
    with pytest.raises(TypeConflict):
        ac.pop("s", "n")
    assert ac.get("s", ["n"]) == {"n": 5}


def test_bad_input_names_the_field(ac):
    ac.put("s", "x", "v")
    with pytest.raises(InvalidInput) as caught:
        ac.pop("s", "x", "middle")
    assert (caught.value.status, caught.value.field) == (400, "mode")
    with pytest.raises(InvalidInput) as caught:
        ac.put("k" * 256, "x", 1)
    assert caught.value.field == "scope"


def test_body_over_the_limit_is_refused(ac):
    with pytest.raises(BodyTooLarge) as caught:
        ac.put("s", "big", "x" * (1024 * 1024 + 1))
    assert (caught.value.status, caught.value.code) == (413, "body_too_large")


def test_scopes_list_follows_pages_and_delete_scope(ac):
    for key in ("p/1", "p/2", "p/3", "q"):
        ac.put(key, "v", 1)
    listed = ac.list_scopes(prefix="p/", page_size=1)
    assert [s["scope"] for s in listed] == ["p/1", "p/2", "p/3"]
    assert listed[0]["owner"] == "alice" and listed[0]["variables"] == 1
    ac.delete_scope("p/2")
    assert [s["scope"] for s in ac.list_scopes(prefix="p/")] == ["p/1", "p/3"]


def test_basic_auth_works_and_missing_or_wrong_credentials_are_refused(remote, alice):
    remote(alice, basic=True).put("s", "x", 1)
    assert remote(alice).get("s", ["x"]) == {"x": 1}
    for client in (remote(), remote(token="not-a-token")):
        with pytest.raises(NotAuthenticated) as caught:
            client.get("s")
        assert (caught.value.status, caught.value.code) == (401, "not_authenticated")


def test_naming_another_owner_needs_the_permission(remote, alice, bob, make_user):
    remote(alice).put("shared", "x", [1])
    with pytest.raises(PermissionDenied) as caught:
        remote(bob).get("shared", owner="alice")
    assert (caught.value.status, caught.value.code) == (403, "permission_denied")
    agent = remote(make_user("agent", "agentstate.view_scope", "agentstate.change_scope"))
    assert agent.push("shared", "x", 2, owner="alice")["length"] == 2
    assert remote(alice).get("shared", ["x"]) == {"x": [1, 2]}
    with pytest.raises(ScopeNotFound):
        remote(bob).get("shared")


def test_get_state_never_fails_and_set_state_raises(ac, remote, alice):
    assert ac.get_state("nowhere", "k", "dflt") == "dflt"
    ac.set_state("s", "k", [1])
    assert ac.get_state("s", "k", "dflt") == [1]
    assert ac.get_state("s", "absent", 0) == 0
    down = remote(alice, retries=0)
    down._http.base_url = f"http://127.0.0.1:{closed_port()}/api/"
    assert down.get_state("s", "k", "dflt") == "dflt"
    with pytest.raises(Unreachable):
        down.set_state("s", "k", 2)


def test_unreachable_server_is_retried_then_reported(live_server):
    attempts = []

    def refuse(request):
        attempts.append(request.method)
        raise httpx.ConnectError("connection refused", request=request)

    client = AgentStateClient(
        "http://agentstate.invalid/api/",
        token="t",
        retries=2,
        backoff=0,
        transport=httpx.MockTransport(refuse),
    )
    with pytest.raises(Unreachable) as caught:
        client.push("s", "x", 1)
    assert isinstance(caught.value, ConnectionError)
    assert attempts == ["POST"] * 3  # nothing was sent: even a push may be repeated


def test_reads_are_retried_on_503_and_read_errors(remote, alice, relay):
    remote(alice).put("s", "x", 1)
    transport, seen = relay([503, httpx.ReadError("reset")])
    client = remote(alice, transport=transport)
    assert client.get("s", ["x"]) == {"x": 1}
    assert seen == ["GET /api/context/"] * 3


def test_non_idempotent_writes_are_not_retried_after_the_request_left(remote, alice, relay):
    remote(alice).put("s", "x", [1])
    transport, seen = relay([503, 503])
    with pytest.raises(ServiceUnavailable) as caught:
        remote(alice, transport=transport).push("s", "x", 2)
    assert (caught.value.status, caught.value.code) == (503, "unavailable")
    transport, seen = relay([httpx.ReadError("reset")])
    with pytest.raises(Unreachable):
        remote(alice, transport=transport).pop("s", "x")
    transport, seen = relay([503])
    with pytest.raises(ServiceUnavailable):
        remote(alice, transport=transport).put("s", "x", 3, if_version=1)
    assert remote(alice).get("s", ["x"]) == {"x": [1]}
    transport, seen = relay([503, 503])
    assert remote(alice, transport=transport).put("s", "x", 3)["value"] == 3
    assert len(seen) == 3


def test_retries_are_bounded(remote, alice, relay):
    transport, seen = relay([503] * 10)
    with pytest.raises(ServiceUnavailable):
        remote(alice, transport=transport, retries=2).get("s")
    assert len(seen) == 3


def test_remote_tool_context_mirrors_the_in_process_one(ac):
    ctx = RemoteToolContext(ac).with_conversation_id("conv-1")
    assert ctx.conversation_id == "conv-1"
    assert ctx.get_state("k", "dflt") == "dflt"
    ctx.set_state("k", {"a": 1})
    other = ctx.with_caller("conv-2")
    assert other.conversation_id == "conv-2" and other.get_state("k") == {"a": 1}
    assert other.shared_state() == ctx.shared_state()
    ctx.set_ext(42)
    assert other.get_ext(int) == 42 and other.get_ext(str) is None
    fresh = RemoteToolContext(ac)
    assert fresh.shared_state() != ctx.shared_state() and fresh.get_state("k") is None
    joined = fresh.with_shared_state(ctx.shared_state())
    assert joined.get_state("k") == {"a": 1}
    named = RemoteToolContext(ac, shared_state=RemoteSharedState(ac, "named"))
    named.set_state("v", 1)
    assert ac.get("named") == {"v": 1}
