"""A hub whose last waiter left lets go after ``IDLE_SECONDS``: its task ends (no
listening connection, no polling), and the next waiter starts it again and is
woken by the next event, on every database."""

import asyncio

import pytest
from django.db import connections

from agentstate.models import PausedRun
from agentstate.services import pauses, wakeups

pytestmark = pytest.mark.django_db(transaction=True)


def put_pause(chat: str) -> None:
    try:
        pauses.put(chat, "call", "alice", None)
    finally:
        connections.close_all()


async def woken_by_a_pause(hub: wakeups.Hub, chat: str) -> bool:
    """Whether a waiter for ``chat``'s pause is woken once it is put."""

    def wants(notice):
        return notice is not None and notice.object_id == PausedRun.object_id(chat, "call")

    with hub.waiter(wants) as waiter:
        # the hub's start wakes every waiter to look again (when it has read the last
        # id, when it listens, when it has caught up): over before the pause
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while wakeups.listens() and not hub.listening and loop.time() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        await waiter.sleep(0)  # re-armed
        await asyncio.to_thread(put_pause, chat)
        return await waiter.sleep(5)


async def ended(hub: wakeups.Hub, seconds: float = 5) -> bool:
    """Whether the hub's task ends within ``seconds``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not hub.task.done() and loop.time() < deadline:
        await asyncio.sleep(0.05)
    return hub.task.done()


def test_an_idle_hub_lets_go_and_the_next_waiter_starts_it_again(quickly_idle):
    async def main() -> None:
        hub = wakeups.Hub()
        assert await woken_by_a_pause(hub, "first")
        first = hub.task
        assert not first.done()  # idle for less than IDLE_SECONDS
        assert await ended(hub)
        assert first.exception() is None and not hub.listening
        assert await woken_by_a_pause(hub, "second")
        assert hub.task is not first and not hub.task.done()
        assert await ended(hub)

    asyncio.run(main())


def test_a_waiter_keeps_the_hub_going_past_idle_seconds(quickly_idle):
    async def main() -> None:
        hub = wakeups.Hub()
        with hub.waiter(lambda notice: False) as waiter:
            await waiter.sleep(1.0)  # more than three times IDLE_SECONDS
            assert not hub.task.done()
        assert await ended(hub)

    asyncio.run(main())
