"""AgentStateStore's get and put as backend operations (``store_get``, ``store_put``):
one round trip each on PostgreSQL, a batch's consecutive gets one together, and
the same answers on every database."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from langgraph.store.base import GetOp, PutOp, SearchOp

from agentstate.contrib.langgraph import AgentStateStore
from agentstate.db import database_epoch
from agentstate.models import Element, Variable
from agentstate.services import context


def one_query(operation, *args, **kwargs):
    with CaptureQueriesContext(connection) as queries:
        result = operation(*args, **kwargs)
    assert len(queries) == 1, [q["sql"] for q in queries]
    return result


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres_only
def test_a_get_a_put_and_a_batch_of_gets_are_one_round_trip_each(store_clock):
    store = AgentStateStore(ttl={"default_ttl": 1, "refresh_on_read": True})
    one_query(store.put, ("a", "b"), "new", {"v": 1})  # the scope made too
    one_query(store.put, ("a", "b"), "new", {"v": 2})
    one_query(store.put, ("a", "c"), "other", {"v": 3}, ttl=None)
    store.put(("a", "b"), "short", {"v": 4}, ttl=0.5)
    assert one_query(store.get, ("a", "b"), "new").value == {"v": 2}  # refreshed
    assert one_query(store.get, ("a", "b"), "new", refresh_ttl=False).value == {"v": 2}
    store_clock.advance(40)
    results = one_query(
        store.batch,
        [
            GetOp(("a", "b"), "new"),
            GetOp(("a", "c"), "other"),
            GetOp(("a", "b"), "missing"),
            GetOp(("nowhere",), "new"),
            GetOp(("a", "b"), "short"),  # expired at 30 s
            GetOp(("a", "b"), "new"),
        ],
    )
    assert [None if r is None else r.value for r in results] == [
        {"v": 2},
        {"v": 3},
        None,
        None,
        None,
        {"v": 2},
    ]
    stored = Variable.objects.get(name="new").value
    assert stored["expires_at"] == pytest.approx(database_epoch() + 60, abs=5)


@pytest.mark.django_db
def test_a_batch_runs_in_order():
    store = AgentStateStore()
    store.put(("n",), "k", {"v": 1})
    results = store.batch(
        [
            GetOp(("n",), "k"),
            PutOp(("n",), "k", {"v": 2}),
            GetOp(("n",), "k"),
            GetOp(("n",), "absent"),
            PutOp(("n",), "k", None),
            GetOp(("n",), "k"),
            SearchOp(("n",)),
        ]
    )
    assert results[0].value == {"v": 1}
    assert results[1] is None
    assert results[2].value == {"v": 2} and results[2].created_at == results[0].created_at
    assert results[3:] == [None, None, None, []]


@pytest.mark.django_db
def test_a_refresh_pushes_only_ttl_items_and_a_put_keeps_created_at_of_an_unswept_item(
    store_clock,
):
    store = AgentStateStore(ttl={"refresh_on_read": True})
    store.put(("t",), "forever", {"v": 1})
    store.put(("t",), "short", {"v": 2}, ttl=1)
    first = store.get(("t",), "short")
    version = Variable.objects.get(name="forever").version
    assert store.get(("t",), "forever").value == {"v": 1}
    assert Variable.objects.get(name="forever").version == version  # nothing to refresh
    store_clock.advance(120)
    assert store.get(("t",), "short") is None  # expired, not refreshed back to life
    assert Variable.objects.get(name="short").value["expires_at"] < database_epoch()
    store.put(("t",), "short", {"v": 3}, ttl=1)
    again = store.get(("t",), "short")
    assert again.value == {"v": 3} and again.created_at == first.created_at


@pytest.mark.django_db
def test_a_put_replaces_a_list_written_through_the_context_api():
    context.put("langgraph:l", "k", ["a", "b"])
    store = AgentStateStore()
    assert store.get(("l",), "k") is None  # a list is no item
    store.put(("l",), "k", {"v": 1})
    assert store.get(("l",), "k").value == {"v": 1}
    assert not Element.objects.exists()
    variable = Variable.objects.get(name="k")
    assert (variable.is_list, variable.head, variable.tail) == (False, 0, 0)
