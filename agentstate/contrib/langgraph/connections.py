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

At most ``LENDS`` connections are lent at once per saver and process (a call
beyond waits for one to come back): an invoke's calls overlap by two, the
put under way and a task's writes (LangGraph puts a graph's checkpoints one
after another), and each connection more is a server process to start and
warm (its functions compiled, their plans made) for no work done sooner.

A connection that failed in a call is closed unless still usable; a forked
process starts with none (the parent's stay the parent's). A saver no longer
used closes its idle connections.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections

IDLE = 8  # idle connections kept per saver and process
LENDS = 2  # connections lent at once per saver and process, by default
_inherited: list[Any] = []  # a parent's connections: never closed (nor freed) in a child


class Borrowed:
    """The connections lent to the calls of passing threads, for the database
    ``alias``, at most ``lends`` at once."""

    def __init__(self, alias: str, lends: int = LENDS) -> None:
        if type(lends) is not int or lends < 1:
            raise ValueError("connections must be a positive integer.")
        self.alias = alias
        self.lends = lends
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._lends = threading.BoundedSemaphore(lends)
        # the wrapper lent to this thread's call under way, if any
        self._lent = threading.local()

    def _forked(self) -> None:
        """In a forked process, start with no connection and every lend free (the
        parent's threads' lends are theirs)."""
        with self._lock:
            if self._pid != os.getpid():
                _inherited.extend(self._idle)
                self._idle, self._pid = [], os.getpid()
                self._lends = threading.BoundedSemaphore(self.lends)

    def _take(self) -> Any:
        with self._lock:
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
    def connection(self) -> Iterator[None]:
        """The calls inside on this thread's open connection, or on a lent one."""
        # the thread's own wrapper, if it has one: ``connections[alias]`` would make
        # one for a thread without (LangGraph's pool threads are new each invoke), only
        # for it to be set aside here; Django's own ``all(initialized_only=True)``
        # looks there
        #
        # The storage of ``connections`` for this thread (or this task's context),
        # looked up once: each get, set and delete through asgiref's ``Local`` looks
        # it up again, which on a sync thread raises and catches a ``RuntimeError``
        # (no running event loop) each time. (An asgiref without that method: the
        # ``Local`` itself.)
        local = connections._connections  # type: ignore[attr-defined]
        storage = local._get_storage() if hasattr(local, "_get_storage") else local
        own = getattr(storage, self.alias, None)
        if own is not None and (
            own.connection is not None
            or own.in_atomic_block
            or own is getattr(self._lent, "wrapper", None)  # a call inside a lent one's
        ):
            yield
            return
        self._forked()
        with self._lends:
            wrapper = self._take()
            setattr(storage, self.alias, wrapper)
            self._lent.wrapper = wrapper
            try:
                yield
            finally:
                self._lent.wrapper = None
                if own is None:
                    delattr(storage, self.alias)
                else:
                    setattr(storage, self.alias, own)
                self._give(wrapper)

    def idle(self) -> int:
        """How many of the saver's connections wait to be lent."""
        with self._lock:
            return len(self._idle)

    def close_with(self, owner: object) -> None:
        """Close the idle connections once ``owner`` is garbage collected."""
        weakref.finalize(owner, _close_anywhere, self)

    def close(self) -> None:
        """Close the idle connections (in a forked process, only its own: the
        parent's are still the parent's)."""
        self._forked()
        with self._lock:
            idle, self._idle = self._idle, []
        for wrapper in idle:
            wrapper.close()


def _close_anywhere(borrowed: Borrowed) -> None:
    """``borrowed.close()`` from wherever the garbage collector runs: on an event
    loop's thread Django refuses to close a connection, so another thread does."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        borrowed.close()
    else:
        threading.Thread(target=borrowed.close, name="agentstate-close", daemon=True).start()
