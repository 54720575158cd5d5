"""Views that may wait (``?wait=S``): async under an ASGI server, sync under WSGI.

A waiting view is a DRF view like any other: it authenticates, checks access
and reads; when the caller asked to wait, it answers a ``Waiting`` (what to
read again, which notices matter, for how long, and how to answer), and
``Waitable`` waits (``services.waiting.until``) and answers.

``Waitable`` is the URL's view. Under ASGI (an event loop runs in the
handler's thread) Django sees a coroutine function: a request without
``wait`` runs the DRF view as any sync view runs (a thread of its own); a
request with ``wait`` runs it on the waiters' thread and then waits holding
no thread and no connection. Under WSGI it is a plain sync view, and a wait
holds its worker (``async_to_sync``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.http import HttpRequest, HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentstate.exceptions import BadInput
from agentstate.services import waiting, wakeups

from .errors import exception_handler

# What marks a callable as a coroutine function: for inspect.iscoroutinefunction
# (Python 3.12+, Django 6's test of a view) its attribute _is_coroutine_marker, whose
# value's name differs between Python releases; for asgiref's (Django 5.2 on Python
# 3.11) its attribute _is_coroutine.
_INSPECT_MARK = getattr(inspect, "_is_coroutine_mark", None) or getattr(
    inspect, "_is_coroutine_marker", None
)
_ASYNCIO_MARK = getattr(asyncio.coroutines, "_is_coroutine", None)


def wait_param(request: Request) -> float | None:
    """``?wait=S`` as seconds, or None when absent; anything else is a 400 ``wait``."""
    values = request.query_params.getlist("wait")
    if not values:
        return None
    if len(values) > 1:
        raise BadInput("wait: give this query parameter only once.", field="wait")
    return waiting.check_wait(values[0])


class Deferred(Response):
    """What a DRF view answers to have ``Waitable`` answer later: ``answer`` (async)
    under ASGI, ``answer_sync`` under WSGI."""

    async def answer(self) -> HttpResponseBase:
        raise NotImplementedError

    def answer_sync(self) -> HttpResponseBase:
        return async_to_sync(self.answer)()


class Waiting(Deferred):
    """What a DRF view answers to have ``Waitable`` wait: ``until(check, wants,
    timeout, key)``, then ``finish`` of what it read makes the answer's data (with no
    query: it runs on the event loop). ``key``: what makes two waiters' checks read
    the same (the user and the object), so that they share a read."""

    def __init__(
        self,
        check: waiting.Check[Any],
        wants: Callable[[wakeups.Notice], bool],
        timeout: float,
        finish: Callable[[Any], Any],
        key: Any = None,
    ) -> None:
        super().__init__()
        self.check, self.wants, self.timeout, self.finish = check, wants, timeout, finish
        self.key = key

    async def answer(self) -> HttpResponseBase:
        try:
            # ``finish`` makes the answer from what the check read (no query: on the loop).
            response = Response(
                self.finish(await waiting.until(self.check, self.wants, self.timeout, self.key))
            )
        except Exception as exc:  # noqa: BLE001 - as DRF's handler would, or raised
            handled = exception_handler(exc, {})
            if handled is None:
                raise
            response = handled
        # As DRF's dispatch finalized the view's answer.
        response.accepted_renderer = self.accepted_renderer
        response.accepted_media_type = self.accepted_media_type
        response.renderer_context = self.renderer_context  # type: ignore[attr-defined]
        for header, value in self.items():
            response.setdefault(header, value)
        return response


class Waitable:
    """The URL's view of a DRF view that may wait (see the module's docstring)."""

    csrf_exempt = True  # as DRF's views: SessionAuthentication checks CSRF itself
    _non_atomic_requests = frozenset({"default"})

    def __init__(self, view_class: type[APIView], *, always: bool = False) -> None:
        self.always = always  # async under ASGI even without ``wait`` (a stream)
        self.view: Callable[..., HttpResponseBase] = csrf_exempt(view_class.as_view())
        # What DRF's as_view() exposes, for the schema generator.
        self.cls = view_class
        self.initkwargs: dict[str, Any] = {}
        self.__name__ = view_class.__name__
        self.__qualname__ = view_class.__qualname__
        self.__doc__ = view_class.__doc__
        self.__module__ = view_class.__module__

    # A coroutine function where an event loop runs (ASGI), else a sync view.
    @property
    def _is_coroutine_marker(self) -> object | None:
        return _INSPECT_MARK if _in_event_loop() else None

    @property
    def _is_coroutine(self) -> object | None:
        return _ASYNCIO_MARK if _in_event_loop() else None

    def __call__(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if _in_event_loop():
            return self._async(request, *args, **kwargs)
        response = self.view(request, *args, **kwargs)
        if isinstance(response, Deferred):
            return response.answer_sync()
        return response

    async def _async(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not self.always and "wait" not in request.GET:
            return await sync_to_async(self.view, thread_sensitive=True)(request, *args, **kwargs)
        response = await wakeups.run(functools.partial(self.view, request, *args, **kwargs))
        if isinstance(response, Deferred):
            return await response.answer()
        return response


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
