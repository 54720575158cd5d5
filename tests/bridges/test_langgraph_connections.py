"""The LangGraph saver's database connections: what an invoke borrows, what it leaves open."""

import asyncio
import gc
import operator
import os
import threading
import time
import warnings
from typing import Annotated, TypedDict

import pytest
from django.db import connection, connections, transaction
from django.db.backends.signals import connection_created
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

from agentstate.contrib.langgraph import AgentStateSaver
from agentstate.contrib.langgraph.connections import LENDS
from agentstate.models import Checkpoint
from tests.faults.processes import wait_until


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def three_steps(saver):
    """Three nodes one after another: four puts and three tasks' writes an invoke,
    LangGraph's writes from its own threads."""
    builder = StateGraph(State)
    for name in ("first", "second", "third"):
        builder.add_node(name, lambda state, name=name: {"log": [name]})
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", "third")
    builder.add_edge("third", END)
    return builder.compile(checkpointer=saver)


def on_a_fresh_thread(app, thread_id):
    """``app.invoke`` run on a new thread; its answer and whether that thread opened
    a connection of its own."""
    found = {}

    def run():
        found["log"] = app.invoke({"log": []}, {"configurable": {"thread_id": thread_id}})["log"]
        found["own"] = connections["default"].connection is not None

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    return found


class Opened:
    """Counts the connections Django opens (``connection_created``) while inside."""

    def __init__(self):
        self.wrappers = []
        self._lock = threading.Lock()

    @property
    def count(self):
        return len(self.wrappers)

    def _opened(self, sender, connection, **kwargs):
        with self._lock:
            self.wrappers.append(connection)

    def __enter__(self):
        connection_created.connect(self._opened, weak=False)
        return self

    def __exit__(self, *exc):
        connection_created.disconnect(self._opened)


def _backends():
    """The server processes of this database's connections (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return {pid for (pid,) in cursor.fetchall()}


def five_invokes(saver):
    """Five invokes, each on a fresh thread; the connections Django opened meanwhile."""
    app = three_steps(saver)
    with Opened() as opened:
        runs = [on_a_fresh_thread(app, f"fresh-{number}") for number in range(5)]
    assert runs == [{"log": ["first", "second", "third"], "own": False}] * 5
    return opened


# LangGraph puts from its own threads: their connections commit on their own.
@pytest.mark.django_db(transaction=True)
def test_invokes_on_fresh_threads_borrow_the_savers_connections_and_leave_none_open():
    """Each invoke runs its ten calls from up to five threads made for it: they
    borrow the saver's connections, at most ``LENDS`` at once, which are kept for
    the next invoke (not one opened per thread) and closed with the saver."""
    saver = AgentStateSaver()
    opened = five_invokes(saver)
    assert 1 <= opened.count <= LENDS
    assert saver.borrowed.idle() == opened.count  # every one given back, open
    saver.borrowed.close()
    assert [wrapper.connection for wrapper in opened.wrappers] == [None] * opened.count
    assert saver.borrowed.idle() == 0
    assert Checkpoint.objects.filter(thread__thread_id__startswith="fresh-").count() == 25


# Server processes are the connections' own only without a pooler between.
@pytest.mark.postgres_only
@pytest.mark.direct_only
@pytest.mark.django_db(transaction=True)
def test_the_server_processes_an_invoke_adds_are_the_savers_idle_connections():
    saver = AgentStateSaver()
    before = _backends()
    opened = five_invokes(saver)
    lent = {wrapper.connection.info.backend_pid for wrapper in opened.wrappers}
    assert _backends() - before == lent
    saver.borrowed.close()


@pytest.mark.django_db(transaction=True)
def test_a_call_inside_the_callers_atomic_block_is_in_its_transaction():
    saver = AgentStateSaver()
    config = {"configurable": {"thread_id": "inside", "checkpoint_ns": ""}}
    with pytest.raises(RuntimeError), transaction.atomic():
        saver.put(config, empty_checkpoint(), {"step": -1}, {})
        assert saver.get_tuple(config) is not None
        raise RuntimeError("rolled back")
    assert saver.get_tuple(config) is None
    assert saver.borrowed.idle() == 0  # nothing lent: the caller's connection


@pytest.mark.django_db(transaction=True)
def test_a_call_on_a_thread_without_a_connection_of_its_own_leaves_it_none():
    """A pool thread's call borrows one of the saver's connections without making
    the thread a Django connection of its own, set aside unused."""
    saver = AgentStateSaver()
    config = {"configurable": {"thread_id": "no-own", "checkpoint_ns": ""}}
    found = {}

    def run():
        saver.put(config, empty_checkpoint(), {"step": -1}, {})
        found["read"] = saver.get_tuple(config) is not None
        found["own"] = hasattr(connections._connections, "default")

    with Opened() as opened:
        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
    assert found == {"read": True, "own": False}
    assert opened.count == 1  # the one lent, for both calls
    saver.borrowed.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("lends", [1, 3])
def test_at_most_connections_calls_hold_a_lent_connection_at_once(lends):
    """Eight threads putting at once: the others wait for a lent connection to come
    back, so no more are opened (nor held at once) than the saver lends, and every
    put is stored."""
    saver = AgentStateSaver(connections=lends)
    start = threading.Barrier(8)
    holding, most = [0], [0]
    lock = threading.Lock()
    real = saver.backend.put_checkpoint

    def counted(*args, **kwargs):
        with lock:
            holding[0] += 1
            most[0] = max(most[0], holding[0])
        try:
            time.sleep(0.02)  # long enough for the others to come
            return real(*args, **kwargs)
        finally:
            with lock:
                holding[0] -= 1

    def put(number):
        config = {"configurable": {"thread_id": f"lends-{number}", "checkpoint_ns": ""}}
        start.wait()
        for step in range(3):
            checkpoint = empty_checkpoint()
            config = saver.put(config, checkpoint, {"step": step}, {})

    backend = saver.backend
    backend.put_checkpoint = counted
    try:
        with Opened() as opened:
            workers = [threading.Thread(target=put, args=(n,)) for n in range(8)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
    finally:
        del backend.put_checkpoint
    assert most[0] == lends
    assert opened.count == lends
    assert Checkpoint.objects.filter(thread__thread_id__startswith="lends-").count() == 24
    saver.borrowed.close()


@pytest.mark.django_db(transaction=True)
def test_a_call_inside_a_lent_call_uses_its_connection():
    """A lend inside a lend on one thread (before the lent connection is even open)
    takes no second one: with one to lend it would wait for itself."""
    saver = AgentStateSaver(connections=1)
    found = {}

    def run():
        with saver.borrowed.connection():
            outer = connections["default"]
            with saver.borrowed.connection():
                found["same"] = connections["default"] is outer
                found["read"] = saver.get_tuple({"configurable": {"thread_id": "none"}})

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert found == {"same": True, "read": None}
    saver.borrowed.close()


@pytest.mark.parametrize("connections_", [0, -1, 1.5, "2", True])
def test_connections_is_a_positive_integer(connections_):
    with pytest.raises(ValueError, match="connections must be a positive integer"):
        AgentStateSaver(connections=connections_)


@pytest.mark.django_db(transaction=True)
def test_a_saver_no_longer_used_closes_its_idle_connections():
    """Django's ``close_all`` does not know a saver's connections: they close when
    the saver goes, not whenever the garbage collector finds them."""
    saver = AgentStateSaver()
    opened = five_invokes(saver)
    assert opened.count and all(wrapper.connection is not None for wrapper in opened.wrappers)
    del saver
    gc.collect()  # LangGraph's compiled graph held it in reference cycles
    assert [wrapper.connection for wrapper in opened.wrappers] == [None] * opened.count


@pytest.mark.django_db(transaction=True)
def test_a_saver_collected_on_an_event_loops_thread_closes_its_connections_too():
    """Django refuses to close a connection on a running event loop's thread: the
    collected saver's connections are closed by another thread."""
    held = [AgentStateSaver()]
    opened = five_invokes(held[0])

    async def drop():
        held.clear()
        gc.collect()

    asyncio.run(drop())
    wait_until(
        lambda: all(wrapper.connection is None for wrapper in opened.wrappers),
        "the collected saver's connections closed",
        seconds=10,
    )


@pytest.mark.django_db(transaction=True)
def test_a_forked_process_closing_its_saver_leaves_the_parents_connections_open():
    """A child's copy of an idle connection is the parent's socket: closing it
    there would end the parent's session (on a server's database; SQLite's file
    stays open to the parent either way)."""
    saver = AgentStateSaver()
    opened = five_invokes(saver)
    with warnings.catch_warnings():
        # Python 3.12+ warns of fork() in a threaded process: the child here takes
        # no lock but the saver's own, which no other thread holds meanwhile
        warnings.simplefilter("ignore", DeprecationWarning)
        child = os.fork()
    if child == 0:  # pragma: no cover - the child's exit code is the test's
        try:
            saver.borrowed.close()
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    for wrapper in opened.wrappers:
        with wrapper.cursor() as cursor:  # each still usable in the parent
            cursor.execute("SELECT 1")
            assert cursor.fetchone() == (1,)
    saver.borrowed.close()
