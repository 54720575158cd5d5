"""The database connections of the LangGraph adapter's calls from passing threads.

Django opens a connection per thread and keeps it for the thread's life. A
sync graph's ``invoke`` runs the checkpointer's writes in a thread pool made
for that invoke, so each invoke's threads would open connections of their
own (a connection's setup costs more than the graph's work) and leave them
to the garbage collector. Instead, a call made in a thread without an open
connection of its own borrows one of the saver's: the connection is the
thread's for that call (``connections[alias]``), then goes back to the
saver's idle ones (at most ``IDLE`` kept, the others closed). A thread with
its own open connection (a request's, one inside ``atomic``) always uses it.

The borrowed calls of one LangGraph thread (``key``) take their turn: one at
a time, on one connection, as LangGraph's own ``PostgresSaver`` runs all of
its calls. An invoke's puts and task writes come from up to five threads at
once; each on a connection of its own, they held as many server processes
and queued on the same thread's rows anyway, and under load (several
processes on few cores) the graph ran half as fast. Calls for different
LangGraph threads still run side by side, each on its own connection.

A connection that failed in a call is closed unless still usable; a forked
process starts with none (the parent's stay the parent's).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections

IDLE = 8  # idle connections kept per saver and process
_inherited: list[Any] = []  # a parent's connections: never closed (nor freed) in a child


class Borrowed:
    """The connections lent to the calls of passing threads, for the database ``alias``."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        # each LangGraph thread's turn: its lock and how many calls hold or wait for it
        self._turns: dict[Hashable, list[Any]] = {}

    def _take(self) -> Any:
        with self._lock:
            if self._pid != os.getpid():
                _inherited.extend(self._idle)
                self._idle, self._pid = [], os.getpid()
                self._turns = {}
            if self._idle:
                return self._idle.pop()
        wrapper = connections.create_connection(self.alias)
        wrapper.inc_thread_sharing()  # lent to one thread at a time, by many threads
        return wrapper

    def _give(self, wrapper: Any) -> None:
        if wrapper.connection is not None and wrapper.errors_occurred:
            if wrapper.is_usable():
                wrapper.errors_occurred = False
            else:
                wrapper.close()
        with self._lock:
            if len(self._idle) < IDLE and self._pid == os.getpid():
                self._idle.append(wrapper)
                return
        wrapper.close()

    @contextmanager
    def _turn(self, key: Hashable) -> Iterator[None]:
        """Inside: the only borrowed call of ``key`` running in this process."""
        with self._lock:
            turn = self._turns.get(key)
            if turn is None:
                turn = self._turns[key] = [threading.Lock(), 0]
            turn[1] += 1
        try:
            with turn[0]:
                yield
        finally:
            with self._lock:
                turn[1] -= 1
                if not turn[1] and self._turns.get(key) is turn:
                    del self._turns[key]

    @contextmanager
    def connection(self, key: Hashable = None) -> Iterator[None]:
        """The calls inside on this thread's open connection, or on a lent one; the
        lent one taken in ``key``'s turn (a LangGraph thread's id; ``None``: no turn)."""
        own = connections[self.alias]
        if own.connection is not None or own.in_atomic_block:
            yield
            return
        if key is None:
            with self._lent():
                yield
            return
        with self._turn(key), self._lent():
            yield

    @contextmanager
    def _lent(self) -> Iterator[None]:
        own = connections[self.alias]
        wrapper = self._take()
        connections[self.alias] = wrapper
        try:
            yield
        finally:
            connections[self.alias] = own
            self._give(wrapper)

    def idle(self) -> int:
        """How many of the saver's connections wait to be lent (open or not yet)."""
        with self._lock:
            return len(self._idle)

    def close(self) -> None:
        """Close the idle connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for wrapper in idle:
            wrapper.close()
