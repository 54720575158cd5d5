"""A view that may wait is a coroutine function where an event loop runs (an ASGI
server's) and a sync view elsewhere (WSGI), by every test Django makes of it:
asgiref's (Django 5.2) and inspect's (Django 6)."""

import asyncio
import inspect

from asgiref.sync import iscoroutinefunction

from agentstate.api.events.views import EventStreamView
from agentstate.api.waiting import Waitable

# inspect reads marks from Python 3.12 on (Django 6 needs 3.12): on 3.11 it cannot.
MARKS = hasattr(inspect, "markcoroutinefunction")


def test_a_waitable_view_is_async_only_in_an_event_loop():
    view = Waitable(EventStreamView, always=True)

    async def in_a_loop() -> tuple[bool, bool]:
        return inspect.iscoroutinefunction(view), iscoroutinefunction(view)

    assert asyncio.run(in_a_loop()) == (MARKS, True)
    assert (inspect.iscoroutinefunction(view), iscoroutinefunction(view)) == (False, False)
