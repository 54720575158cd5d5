"""The waiters' thread (``wakeups.run``): a read that ends after the loop that asked
for it has closed (a request's loop under WSGI, once its waiter gives up) is
dropped without an error logged; one not yet started when its waiter gives up
does not run."""

import asyncio
import contextlib
import logging
import threading

import pytest
from asgiref.sync import async_to_sync

from agentstate.services import wakeups


class ClosingLoop(asyncio.SelectorEventLoop):
    """A loop that, once ``closing``, is closed by the next call another thread makes
    of it: it closed between that thread's check and its call, as a request's loop
    under WSGI may while the waiters' thread hands it a read's answer (a race no
    test can time)."""

    closing = False

    def call_soon_threadsafe(self, *args, **kwargs):
        if self.closing:
            self._closed = True  # what close() would have done by then, on its thread
        return super().call_soon_threadsafe(*args, **kwargs)


@pytest.mark.parametrize("key", [None, "a read shared by its waiters"])
def test_a_read_ending_as_its_loop_closes_is_dropped_quietly(caplog, key):
    started, release = threading.Event(), threading.Event()

    def slow_read():
        started.set()
        release.wait(5)
        return 7

    async def give_up():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wakeups.run(slow_read, key=key), 0.05)

    loop = ClosingLoop()
    try:
        with caplog.at_level(logging.ERROR):
            loop.run_until_complete(give_up())
            assert started.wait(5)
            loop.closing = True
            release.set()
            # the waiters' thread has one worker: this runs once the read and its
            # callbacks are done
            wakeups._executor.submit(lambda: None).result(5)
    finally:
        loop._closed = False
        loop.close()
    assert [r.getMessage() for r in caplog.records] == []
    assert key not in wakeups._queued


def test_a_read_still_queued_when_its_waiter_gives_up_does_not_run():
    busy, release, ran = threading.Event(), threading.Event(), []
    wakeups._executor.submit(lambda: (busy.set(), release.wait(5)))
    assert busy.wait(5)

    async def give_up():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wakeups.run(ran.append, 1), 0.05)

    async_to_sync(give_up)()
    release.set()
    wakeups._executor.submit(lambda: None).result(5)
    assert ran == []
