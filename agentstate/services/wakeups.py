"""Wake-ups of waiters: one listener per process, whatever the number of waiters.

A waiter (a long-poll, an event stream, ``approvals.await_decision``) holds no
thread and no database connection while it waits: it registers a ``Waiter``
with the ``Hub`` of its event loop and sleeps on an ``asyncio.Event``. The hub
wakes the waiters a new event concerns:

- on PostgreSQL, from one ``LISTEN agentstate_events`` connection (psycopg's
  async connection), the NOTIFY of each event being sent in the event's own
  transaction (a trigger), so it arrives after the commit and never for a
  change rolled back. The trigger sends it only while some process listens:
  the listener holds an advisory lock for that (``sql/05_feed.sql``), since a
  NOTIFY makes every committing writer of events wait for the others;
- elsewhere (or while that connection is down), by reading the event log
  above the last id it saw, every ``POLL_SECONDS``: one poller, not one per
  waiter.

A hub that has had no waiter for ``IDLE_SECONDS`` lets go: it closes the
listening connection (so events stop sending their NOTIFY) or stops polling.
The next waiter starts it again, as the first one did.

What a waiter then reads from the database (and the first reading of a
waiting request, authentication included) runs on one thread of its own
with one connection (``run``), so that a process's waiters never hold more
than two connections: the listener's and that one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import DatabaseError, connections

from agentstate.backends.feed import postgresql_bound, settled
from agentstate.conf import agentstate_settings
from agentstate.models import Event

logger = logging.getLogger(__name__)

CHANNEL = "agentstate_events"
POLL_SECONDS = 0.5
# How long a new listener waits, at most, for the transactions that may have
# written events before it came (their triggers saw no listener): then every
# waiter looks again.
CATCH_UP_SECONDS = 5.0
# How long a hub keeps listening (or polling) after its last waiter left.
IDLE_SECONDS = 60.0
# How often a listening hub looks whether it has been idle that long.
IDLE_CHECK_SECONDS = 1.0
T = TypeVar("T")


@dataclass(frozen=True)
class Notice:
    """What a waiter learns of one new event (no query needed to tell whether it matters)."""

    id: int
    kind: str
    object_type: str
    object_id: str
    run_id: str | None

    @classmethod
    def of(cls, payload: dict[str, Any]) -> Notice:
        return cls(
            int(payload["id"]),
            str(payload["kind"]),
            str(payload["object_type"]),
            str(payload["object_id"]),
            payload.get("run_id"),
        )


# A notice that matches every waiter: something may have been missed (a lost connection).
ANYTHING = None


@dataclass(frozen=True)
class Wants:
    """The notices whose every named field (of ``Notice``) has the value given; none
    named: every notice. A hub files its waiter under one of them (``FILED_BY``), so
    that a notice is checked against the waiters it may concern only."""

    fields: tuple[tuple[str, Any], ...] = ()

    def __call__(self, notice: Notice) -> bool:
        return all(getattr(notice, name) == value for name, value in self.fields)

    def filed_by(self) -> tuple[str, Any] | None:
        """The field and value a hub files the waiter under, the most telling of
        those named; ``None``: every notice is asked."""
        named = dict(self.fields)
        return next(((name, named[name]) for name in FILED_BY if name in named), None)


# The fields a waiter is filed under, the most telling first.
FILED_BY = ("object_id", "run_id", "kind", "object_type")


@dataclass(eq=False)
class Waiter:
    wants: Callable[[Notice], bool]
    woken: asyncio.Event = field(default_factory=asyncio.Event)

    async def sleep(self, seconds: float) -> bool:
        """Sleep until woken or ``seconds`` pass; whether it was woken. Re-armed."""
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.woken.wait(), seconds)
        woken = self.woken.is_set()
        self.woken.clear()
        return woken


# The one thread (and so one connection) on which waiters read the database.
_executor = concurrent.futures.ThreadPoolExecutor(
    max_workers=1, thread_name_prefix="agentstate-waiters"
)


def _in_waiters_thread(func: Callable[..., T], *args: Any) -> T:
    """Run ``func`` on the waiters' connection, kept open between calls (unless broken)."""
    for conn in connections.all(initialized_only=True):
        conn.close_if_unusable_or_obsolete()
    try:
        return func(*args)
    finally:
        for conn in connections.all(initialized_only=True):
            # The site's CONN_MAX_AGE is for request threads; this one thread keeps it.
            if conn.connection is not None:
                conn.close_at = None


# Reads queued and not yet started, by key: a waiter asking the same read joins it.
_queued: dict[Any, asyncio.Future[Any]] = {}


async def run(func: Callable[..., T], *args: Any, key: Any = None) -> T:
    """``func(*args)`` on the waiters' thread, awaited. The caller's context variables
    are not copied: every waiter shares that thread's one connection.

    With a ``key``, a call while another of the same key is queued and not yet
    started shares its answer (fifty waiters woken for one request read it once)."""
    loop = asyncio.get_running_loop()
    if key is None:
        return await _submitted(loop, _in_waiters_thread, func, *args)
    queued = _queued.get(key)
    if queued is not None and queued.get_loop() is loop:
        return await asyncio.shield(queued)

    def started() -> T:
        # Run on the loop after ``future`` is bound (the loop runs it later).
        _on_loop(loop, lambda: _forget(key, future))
        return _in_waiters_thread(func, *args)

    future = _submitted(loop, started)
    _queued[key] = future
    try:
        return await asyncio.shield(future)
    finally:
        _forget(key, future)


def _submitted(
    loop: asyncio.AbstractEventLoop, func: Callable[..., T], *args: Any
) -> asyncio.Future[T]:
    """``func(*args)`` on the waiters' thread, as a future of ``loop``; cancelled, the
    call is too if it has not started.

    ``loop.run_in_executor`` would do the same, but hands the answer to the loop
    even once it is closed, and then logs an error: a request's loop under WSGI
    (``async_to_sync``) closes as soon as its waiter gives up, while a read it
    asked may still be running. The answer is then dropped: nobody awaits it."""
    future: asyncio.Future[T] = loop.create_future()
    call = _executor.submit(func, *args)
    future.add_done_callback(lambda f: call.cancel() if f.cancelled() else None)
    call.add_done_callback(lambda done: _on_loop(loop, _settle, future, done))
    return future


def _settle(future: asyncio.Future[T], done: concurrent.futures.Future[T]) -> None:
    """``future`` (the loop's) given ``done``'s outcome, unless already cancelled."""
    if future.cancelled():
        return
    if done.cancelled():
        future.cancel()
    elif (error := done.exception()) is not None:
        future.set_exception(error)
    else:
        future.set_result(done.result())


def _on_loop(loop: asyncio.AbstractEventLoop, func: Callable[..., Any], *args: Any) -> None:
    """``func(*args)`` on ``loop``'s thread, from any other, or nothing once it is closed."""
    try:
        loop.call_soon_threadsafe(func, *args)
    except RuntimeError:  # closed (asyncio says no more than that)
        if not loop.is_closed():
            raise


def _forget(key: Any, future: asyncio.Future[Any]) -> None:
    if _queued.get(key) is future:
        del _queued[key]


def latest_id(alias: str = "default") -> int:
    last = Event.objects.using(alias).order_by("-pk").values_list("pk", flat=True).first()
    return last or 0


def _settled_beyond(drawn: int) -> bool:
    """Whether every transaction that had drawn an event id up to ``drawn`` has ended:
    each holds its feed lock keyed below its ids (``agentstate.backends.feed``)."""
    return postgresql_bound() > drawn


def _notices_after(after: int) -> list[Notice]:
    rows = Event.objects.filter(settled(after)).order_by("pk")[:1000]
    return [
        Notice(
            e.pk,
            e.kind,
            e.object_type,
            e.object_id,
            e.object_id if e.object_type == "run" else (e.details or {}).get("run_id"),
        )
        for e in rows.only("pk", "kind", "object_type", "object_id", "details")
    ]


class Hub:
    """The waiters of one event loop and what wakes them."""

    def __init__(self) -> None:
        self.waiters: set[Waiter] = set()
        # The waiters by what they are filed under (``Wants.filed_by``); the others
        # (a ``wants`` of another kind, or naming nothing) are asked for every notice.
        self.filed: dict[tuple[str, Any], set[Waiter]] = {}
        self.unfiled: set[Waiter] = set()
        self.task: asyncio.Task[None] | None = None
        self.listening = False
        # when the last waiter left (the event loop's time)
        self.idle_since = asyncio.get_running_loop().time()

    @contextlib.contextmanager
    def waiter(self, wants: Callable[[Notice], bool]) -> Iterator[Waiter]:
        waiter = Waiter(wants)
        key = wants.filed_by() if isinstance(wants, Wants) else None
        among = self.unfiled if key is None else self.filed.setdefault(key, set())
        self.waiters.add(waiter)
        among.add(waiter)
        self._start()
        try:
            yield waiter
        finally:
            self.waiters.discard(waiter)
            among.discard(waiter)
            if key is not None and not among:
                del self.filed[key]
            if not self.waiters:
                self.idle_since = asyncio.get_running_loop().time()

    def idle(self) -> bool:
        """Whether nobody has waited for ``IDLE_SECONDS``: the hub then lets go."""
        return (
            not self.waiters and asyncio.get_running_loop().time() - self.idle_since >= IDLE_SECONDS
        )

    def dispatch(self, notice: Notice | None) -> None:
        if notice is ANYTHING:
            for waiter in list(self.waiters):
                waiter.woken.set()
            return
        asked = [self.unfiled]
        for name in FILED_BY:
            among = self.filed.get((name, getattr(notice, name)))
            if among is not None:
                asked.append(among)
        for waiters in asked:
            for waiter in list(waiters):
                if waiter.wants(notice):
                    waiter.woken.set()

    def _start(self) -> None:
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        """Listen, or poll, until idle. The task ends in the step that found it idle
        (no ``await`` between), so a waiter that comes after finds it done and
        starts another (``_start``)."""
        last = await run(latest_id)
        # What committed before ``last`` was read and after a waiter's first check:
        # every waiter looks again.
        self.dispatch(ANYTHING)
        while not self.idle():
            if listens():
                try:
                    await self._listen()
                    continue  # idle (or a waiter came while it closed: listen again)
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - poll until LISTEN works again
                    logger.warning("LISTEN %s failed; polling", CHANNEL, exc_info=True)
                finally:
                    self.listening = False
            last = await self._poll(last)

    async def _poll(self, last: int) -> int:
        """Read the event log every ``POLL_SECONDS`` (other databases; PostgreSQL for
        a while after LISTEN failed) until idle or time to listen again; the last
        id seen."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while not self.idle():
            try:
                for notice in await run(_notices_after, last):
                    last = max(last, notice.id)
                    self.dispatch(notice)
            except DatabaseError:
                logger.warning("polling the event log failed", exc_info=True)
            await asyncio.sleep(POLL_SECONDS)
            if listens() and loop.time() > deadline:
                break
        return last

    async def _listen(self) -> None:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(listen_conninfo(), autocommit=True)
        caught_up = None
        try:
            await conn.execute(f"LISTEN {CHANNEL}")
            # Held for as long as this connection lives: from now on, every event's
            # trigger sends its NOTIFY.
            await conn.execute("SELECT pg_advisory_lock_shared(agentstate_listening(), 0)")
            cursor = await conn.execute(
                "SELECT coalesce(pg_sequence_last_value('agentstate_event_id_seq'), 0)"
            )
            (drawn,) = await cursor.fetchone() or (0,)
            self.listening = True
            # Whatever committed before LISTEN took effect: every waiter looks again.
            self.dispatch(ANYTHING)
            caught_up = asyncio.get_running_loop().create_task(self._catch_up(drawn))
            while not self.idle():
                # notices that come between two of these loops wait in the connection
                async for note in conn.notifies(timeout=IDLE_CHECK_SECONDS):
                    notice: Notice | None
                    try:
                        notice = Notice.of(json.loads(note.payload))
                    except (ValueError, KeyError, TypeError):
                        notice = ANYTHING
                    self.dispatch(notice)
        finally:
            if caught_up is not None:
                caught_up.cancel()
            await conn.close()

    async def _catch_up(self, drawn: int) -> None:
        """Every waiter looks again once each transaction that had drawn an event id
        when the listener came (up to ``drawn``) has ended: their triggers may have
        seen no listener and sent nothing (at most ``CATCH_UP_SECONDS``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CATCH_UP_SECONDS
        with contextlib.suppress(DatabaseError):
            while loop.time() < deadline and not await run(_settled_beyond, drawn):
                await asyncio.sleep(0.02)
        self.dispatch(ANYTHING)


def listens() -> bool:
    """Whether this process's waiters are woken by LISTEN (PostgreSQL, ``LISTEN`` on)."""
    return connections["default"].vendor == "postgresql" and bool(agentstate_settings.LISTEN)


def listen_conninfo(alias: str = "default") -> str:
    """The libpq connection string of the site's database, for the listener."""
    from psycopg.conninfo import make_conninfo

    params = connections[alias].get_connection_params()
    keep = {
        key: value
        for key, value in params.items()
        if key not in ("context", "cursor_factory", "prepare_threshold", "server_side_binding")
        and value not in (None, "")
    }
    return make_conninfo(**keep)


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def hub() -> Hub:
    """The hub of the running event loop (one per process under an ASGI server)."""
    loop = asyncio.get_running_loop()
    with _lock:
        found = _hubs.get(loop)
        if found is None:
            found = _hubs[loop] = Hub()
        return found


def close_connections() -> None:
    """Close the waiters' connection (it opens again when next needed): before a
    test database is dropped, or a fork."""
    _executor.submit(connections.close_all).result()
