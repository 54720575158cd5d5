"""AgentStateStore: LangGraph's BaseStore on context variables."""

import time
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from langgraph.store.base import BaseStore

from agentstate.backends.events import json_time
from agentstate.contrib.langgraph import AgentStateStore
from agentstate.db import database_epoch, database_now
from agentstate.models import Scope, Variable
from agentstate.services import context
from agentstate.services.sweep import sweep

pytestmark = pytest.mark.django_db


@pytest.fixture
def store():
    return AgentStateStore()


def test_a_namespace_is_a_scope_and_a_key_a_variable(store):
    store.put(("users", "alice"), "prefs", {"theme": "dark"})
    item = store.get(("users", "alice"), "prefs")
    assert isinstance(store, BaseStore)
    assert (item.namespace, item.key, item.value) == (
        ("users", "alice"),
        "prefs",
        {"theme": "dark"},
    )
    assert context.get("langgraph:users.alice", ["prefs"])["prefs"]["value"] == {"theme": "dark"}
    created = item.created_at
    store.put(("users", "alice"), "prefs", {"theme": "light"})
    again = store.get(("users", "alice"), "prefs")
    assert again.value == {"theme": "light"}
    assert again.created_at == created and again.updated_at >= created
    store.delete(("users", "alice"), "prefs")
    assert store.get(("users", "alice"), "prefs") is None
    store.delete(("users", "alice"), "prefs")  # deleting what is gone is no error


def test_search_filters_and_pages(store):
    for i in range(5):
        store.put(("docs", "a" if i % 2 else "b"), f"d{i}", {"n": i, "kind": "x" if i < 3 else "y"})
    store.put(("other",), "o", {"n": 99})
    assert {i.key for i in store.search(("docs",))} == {"d0", "d1", "d2", "d3", "d4"}
    assert {i.key for i in store.search(("docs",), filter={"kind": "x"})} == {"d0", "d1", "d2"}
    assert {i.key for i in store.search(("docs",), filter={"n": {"$gte": 3}})} == {"d3", "d4"}
    assert {i.key for i in store.search(("docs", "a"))} == {"d1", "d3"}
    assert len(store.search((), limit=2)) == 2
    assert len(store.search((), limit=10, offset=4)) == 2


def test_list_namespaces(store):
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("f",)]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("f",)]
    assert store.list_namespaces(prefix=("a",), max_depth=2) == [("a", "b"), ("a", "e")]
    assert store.list_namespaces(suffix=("d",)) == [("a", "b", "d")]
    assert store.list_namespaces(prefix=("a", "*", "c")) == [("a", "b", "c")]


def test_an_expired_item_is_never_read_even_unswept(store, store_clock):
    store.put(("t",), "short", {"v": 1}, ttl=1)
    store.put(("t",), "kept", {"v": 2})
    assert store.get(("t",), "short").value == {"v": 1}
    store_clock.advance(120)
    assert store.get(("t",), "short") is None
    assert [i.key for i in store.search(("t",))] == ["kept"]
    assert Variable.objects.filter(name="short").exists()  # not swept yet
    assert store.sweep_ttl() == 1
    assert not Variable.objects.filter(name="short").exists()
    assert store.list_namespaces() == [("t",)]


def test_an_items_times_are_the_databases_whatever_the_clock_of_its_process(store, monkeypatch):
    """Nodes whose clocks drift apart agree on what expired: a process a day ahead
    or a day behind the database writes, reads and sweeps by the database's clock.
    (With each process's own clock, the item put by the process behind was expired
    at once, and the one put by the process ahead lived a day.)"""
    real = time.time
    for skew in (86_400, -86_400):
        monkeypatch.setattr(time, "time", lambda skew=skew: real() + skew)
        store.put(("clock",), f"k{skew}", {"v": skew}, ttl=1)
        item = store.get(("clock",), f"k{skew}", refresh_ttl=False)
        assert item is not None and item.value == {"v": skew}
        assert abs((item.created_at - database_now()).total_seconds()) < 5
        assert item.updated_at == item.created_at
        stored = Variable.objects.get(name=f"k{skew}").value
        assert stored["expires_at"] == pytest.approx(database_epoch() + 60, abs=5)
        assert stored["created_at"] == json_time(item.created_at)  # as events hold a time
        assert f"k{skew}" in {i.key for i in store.search(("clock",))}
        assert store.list_namespaces() == [("clock",)]
        assert store.sweep_ttl() == 0


def test_a_read_refreshes_the_ttl(store_clock):
    store = AgentStateStore(ttl={"default_ttl": 1, "refresh_on_read": True})
    store.put(("t",), "k", {"v": 1})
    store_clock.advance(50)
    assert store.get(("t",), "k") is not None  # refreshed: expires 60 s from now again
    store_clock.advance(50)
    assert store.get(("t",), "k", refresh_ttl=False) is not None  # 10 s left
    store_clock.advance(100)
    assert store.get(("t",), "k") is None


def test_the_async_api():
    store = AgentStateStore()
    async_to_sync(store.aput)(("a",), "k", {"v": 1})
    assert async_to_sync(store.aget)(("a",), "k").value == {"v": 1}
    assert [i.key for i in async_to_sync(store.asearch)(("a",))] == ["k"]
    assert Scope.objects.filter(key="langgraph:a").exists()


def test_the_sweep_deletes_expired_items_in_batches_and_keeps_the_rest(store, alice, store_clock):
    for i in range(5):
        store.put(("t", "a"), f"short-{i}", {"v": i}, ttl=1)
    store.put(("t", "a"), "long", {"v": "long"}, ttl=60)
    store.put(("t", "b"), "forever", {"v": "forever"})
    # Not the store's: a variable of another scope and one of an owned scope, both
    # with an expires_at long past.
    context.put("other", "x", {"expires_at": 1.0})
    context.put("langgraph:t.a", "owned", {"value": 1, "expires_at": 1.0}, owner=alice)
    store_clock.advance(120)
    # Before the sweep, no read returns an expired item.
    assert store.get(("t", "a"), "short-0") is None
    assert {i.key for i in store.search(("t",))} == {"long", "forever"}
    assert Variable.objects.filter(name__startswith="short-").count() == 5
    seen = []
    result = sweep(batch_size=2, progress=lambda label, total: seen.append((label, total)))
    assert result.purged_store_items == 5
    assert [s for s in seen if s[0] == "purged store items"] == [
        ("purged store items", 2),
        ("purged store items", 4),
        ("purged store items", 5),
    ]
    assert not Variable.objects.filter(name__startswith="short-").exists()
    assert store.get(("t", "a"), "long").value == {"v": "long"}
    assert store.get(("t", "b"), "forever").value == {"v": "forever"}
    assert set(Variable.objects.values_list("scope__key", "name")) == {
        ("langgraph:t.a", "long"),
        ("langgraph:t.b", "forever"),
        ("other", "x"),
        ("langgraph:t.a", "owned"),
    }
    assert sweep().purged_store_items == 0  # idempotent
    # Past the long item's TTL too: the management command's sweep deletes it.
    store_clock.advance(3600)
    assert store.get(("t", "a"), "long") is None
    out = StringIO()
    call_command("agentstate_expire", stdout=out)
    assert "purged store items: 1" in out.getvalue()
    assert store.list_namespaces() == [("t", "b")]
    assert store.sweep_ttl() == 0


def test_the_sweep_goes_on_across_namespaces_from_where_each_batch_ended(store, store_clock):
    # In each of three namespaces, expired items between kept ones (by name), so that
    # batches of two end inside a namespace and between two of them.
    for ns in ("a", "b", "c"):
        for i in range(7):
            store.put(("many", ns), f"k{i}", {"v": i}, ttl=1 if i % 2 else None)
    store_clock.advance(120)
    assert store.sweep_ttl(batch_size=2) == 9
    assert sweep(batch_size=2).purged_store_items == 0
    assert sorted(Variable.objects.values_list("scope__key", "name")) == [
        (f"langgraph:many.{ns}", f"k{i}") for ns in ("a", "b", "c") for i in (0, 2, 4, 6)
    ]
