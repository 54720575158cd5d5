"""On PostgreSQL an event's NOTIFY is sent only while some process listens.

A transaction that sent a NOTIFY holds one lock of the whole cluster from its
commit's start to its end, so every writer of events would commit in turn. A
listener holds the advisory lock ``agentstate_listening()`` shared; an event's
trigger sends its NOTIFY only then (``sql/05_feed.sql``). A listener that has just
come looks again once the writers that could not see it have ended
(``Hub._catch_up``).
"""

import asyncio
import threading

import psycopg
import pytest
from django.db import connection, connections, transaction

from agentstate.models import Event
from agentstate.services import pauses, wakeups
from tests.waiting.test_idle_hub import ended

pytestmark = [
    pytest.mark.postgres_only,
    # A pooler in transaction mode keeps neither a LISTEN nor a session's lock.
    pytest.mark.direct_only,
    pytest.mark.django_db(transaction=True),
]


def listener(present: bool) -> psycopg.Connection:
    """A connection that listens, holding the listening lock or not."""
    conn = psycopg.connect(wakeups.listen_conninfo(), autocommit=True)
    conn.execute(f"LISTEN {wakeups.CHANNEL}")
    if present:
        conn.execute("SELECT pg_advisory_lock_shared(agentstate_listening(), 0)")
    return conn


def heard(conn: psycopg.Connection) -> list[str]:
    return [note.payload for note in conn.notifies(timeout=0.5, stop_after=1)]


def test_no_notify_is_sent_while_nobody_holds_the_listening_lock():
    with listener(present=False) as conn:
        pauses.put("chat", "call", "alice", None)
        assert Event.objects.count() == 1
        assert heard(conn) == []


def test_an_event_is_notified_while_a_listener_holds_the_lock():
    with listener(present=True) as conn:
        pauses.put("chat", "call", "alice", None)
        (payload,) = heard(conn)
    (event,) = Event.objects.all()
    assert f'"id" : {event.pk}' in payload and '"kind" : "pause.created"' in payload


def test_the_lock_ends_with_the_listener():
    with listener(present=True):
        pass
    with listener(present=False) as conn:
        pauses.put("chat", "call", "alice", None)
        assert heard(conn) == []


def listening_locks() -> int:
    """How many sessions hold this database's listening lock (an advisory lock is
    per database: other test databases of the cluster have listeners of their own)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
            " AND classid = agentstate_listening()::oid AND objid = 0 AND objsubid = 2"
            " AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        (held,) = cursor.fetchone()
    connection.close()  # this thread's: the test database must be droppable
    return held


def test_an_idle_hub_lets_go_of_the_listening_lock(quickly_idle):
    """Once nobody has waited for IDLE_SECONDS, events send no NOTIFY again."""

    async def main() -> tuple[int, int]:
        hub = wakeups.Hub()
        with hub.waiter(lambda notice: True):
            while not hub.listening:
                await asyncio.sleep(0.01)
            held = await asyncio.to_thread(listening_locks)
        await ended(hub)
        return held, await asyncio.to_thread(listening_locks)

    try:
        assert asyncio.run(main()) == (1, 0)
        with listener(present=False) as conn:
            pauses.put("chat", "call", "alice", None)
            assert heard(conn) == []
    finally:
        wakeups.close_connections()


def test_a_listener_that_comes_during_a_write_wakes_its_waiters_after_it_commits():
    """The write's trigger ran before the listener held the lock (no NOTIFY), and
    it commits after the listener came: the catch-up wakes the waiter."""
    written, release = threading.Event(), threading.Event()

    def write() -> None:
        try:
            with transaction.atomic():
                pauses.put("late", "call", "alice", None)
                written.set()
                release.wait(10)
        finally:
            connections.close_all()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert written.wait(10)

        async def wait() -> bool:
            hub = wakeups.Hub()
            with hub.waiter(lambda notice: notice is not None) as waiter:
                await waiter.sleep(0)  # re-armed: the wakes of the start are not this test's
                while not hub.listening:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.2)
                waiter.woken.clear()  # the start's own look again
                release.set()
                woken = await waiter.sleep(3)
            hub.task.cancel()
            return woken

        assert asyncio.run(wait())
    finally:
        release.set()
        writer.join()
        wakeups.close_connections()
    assert Event.objects.filter(object_id__startswith="late").count() == 1
    assert connection.vendor == "postgresql"
