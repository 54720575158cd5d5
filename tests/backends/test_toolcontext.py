"""ToolContext (docs/concepts.md, after llm_tool's ToolContext)."""

import logging
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import DatabaseError, connection

import agentstate
from agentstate.exceptions import BadInput
from agentstate.models import Scope, Variable
from agentstate.services import context
from agentstate.toolcontext import SharedState, ToolContext

pytestmark = pytest.mark.django_db


@dataclass
class SessionDir:
    path: str


def test_is_importable_from_the_package_top_level():
    assert agentstate.ToolContext is ToolContext


def test_a_new_context_has_no_conversation_and_a_fresh_site_scope():
    first, second = ToolContext(), ToolContext()
    assert first.conversation_id is None
    assert first.shared_state() != second.shared_state()
    assert first.shared_state().owner is None
    first.set_state("k", 1)
    assert second.get_state("k", "absent") == "absent"
    assert Scope.objects.get().owner is None


def test_nothing_is_stored_until_the_first_set_state():
    ctx = ToolContext()
    assert ctx.get_state("k", 5) == 5
    assert not Scope.objects.exists()


def test_state_round_trips_and_is_kept_in_the_database():
    ctx = ToolContext().with_conversation_id("conv-1")
    ctx.set_state("plan", {"steps": [1, 2]})
    assert ctx.get_state("plan") == {"steps": [1, 2]}
    scope = ctx.shared_state().scope
    assert context.get(scope, ["plan"]) == {"plan": {"steps": [1, 2]}}


def test_changes_record_the_conversation_id_as_actor():
    ctx = ToolContext().with_conversation_id("conv-7")
    ctx.set_state("k", 1)
    assert Variable.objects.get().updated_by == "conv-7"
    ctx.with_caller("alice").set_state("k", 2)
    assert Variable.objects.get().updated_by == "alice"


def test_set_state_returns_the_new_version():
    ctx = ToolContext()
    assert ctx.set_state("k", 1).version == 1
    assert ctx.set_state("k", 2).version == 2


def test_with_shared_state_shares_the_store():
    writer = ToolContext().with_conversation_id("writer")
    reader = ToolContext().with_shared_state(writer.shared_state())
    writer.set_state("k", "v")
    assert reader.get_state("k") == "v"
    reader.set_state("k", "w")
    assert writer.get_state("k") == "w"


def test_a_named_handle_reaches_an_existing_scope():
    context.put("projects/demo", "k", 1)
    assert ToolContext(shared_state=SharedState("projects/demo")).get_state("k") == 1


def test_an_owner_scopes_the_state_to_that_user(alice, bob):
    context.put("default", "k", "alice's", owner=alice)
    context.put("default", "k", "site's")
    assert (
        ToolContext().with_shared_state(SharedState("default", alice)).get_state("k") == "alice's"
    )
    assert (
        ToolContext().with_shared_state(SharedState("default", bob)).get_state("k", "none")
        == "none"
    )
    assert ToolContext().with_shared_state(SharedState("default")).get_state("k") == "site's"
    fresh = ToolContext(owner=bob)
    fresh.set_state("k", 1)
    assert Scope.objects.get(key=fresh.shared_state().scope).owner == bob


def test_with_caller_changes_identity_and_shares_state_and_extensions():
    session = ToolContext().with_conversation_id("server")
    session.set_ext(SessionDir("/tmp"))
    session.set_state("k", 1)
    caller = session.with_caller("alice")
    assert caller.conversation_id == "alice" and session.conversation_id == "server"
    assert caller.shared_state() == session.shared_state()
    assert caller.get_ext(SessionDir) == SessionDir("/tmp")
    caller.set_ext(42)  # extensions are shared, not copied
    assert session.get_ext(int) == 42
    assert caller.get_state("k") == 1


def test_extensions_are_keyed_by_exact_type_and_never_stored():
    ctx = ToolContext()
    assert ctx.get_ext(SessionDir) is None
    ctx.set_ext(SessionDir("/a"))
    ctx.set_ext(SessionDir("/b"))
    ctx.set_ext(True)
    assert ctx.get_ext(SessionDir) == SessionDir("/b")
    assert ctx.get_ext(bool) is True and ctx.get_ext(int) is None
    assert not Scope.objects.exists()


def test_with_shared_state_refuses_anything_but_a_handle():
    with pytest.raises(TypeError):
        ToolContext().with_shared_state("a scope key")


def test_a_bad_conversation_id_or_scope_is_refused():
    with pytest.raises(BadInput):
        ToolContext().with_conversation_id("c" * 256)
    with pytest.raises(BadInput):
        SharedState("")


def test_get_state_never_fails_and_set_state_raises_on_bad_input():
    ctx = ToolContext()
    assert ctx.get_state("\x00bad", "dflt") == "dflt"
    with pytest.raises(BadInput):
        ctx.set_state("k", float("nan"))
    with pytest.raises(BadInput):
        ctx.set_state("", 1)
    assert not Variable.objects.exists()


def test_call_tool_works_on_the_contexts_scope_as_its_conversation():
    ctx = ToolContext().with_conversation_id("conv-9")
    assert ctx.call_tool("push_context_variable", {"name": "todo", "value": "a"}).startswith(
        "value pushed"
    )
    assert ctx.get_state("todo") == ["a"]
    assert Variable.objects.get().updated_by == "conv-9"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.django_db(transaction=True)
def test_get_state_returns_the_default_and_set_state_raises_when_the_store_is_unreachable(caplog):
    ctx = ToolContext()
    ctx.set_state("k", "stored")
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "postgresql":
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(closed_port()))
    else:
        connection.settings_dict["NAME"] = str(
            Path(tempfile.gettempdir()) / "no-such-dir" / "db.sqlite3"
        )
    try:
        with caplog.at_level(logging.WARNING, logger="agentstate.services.context"):
            assert ctx.get_state("k", "fallback") == "fallback"
        assert any("get_state" in record.getMessage() for record in caplog.records)
        with pytest.raises(DatabaseError):
            ctx.set_state("k", "lost")
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    assert ctx.get_state("k") == "stored"
