"""``GET /api/events/``: the audit trail, limited to what the caller may see; with
``after``, a feed to follow (oldest first, exactly once: ``backends.feed``), which
may wait for the next event (``?wait=S``); ``GET /api/events/stream/``: the same
feed as Server-Sent Events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from agentstate.backends.feed import settled
from agentstate.exceptions import BadInput
from agentstate.models import Event
from agentstate.models.querysets import EventQuerySet
from agentstate.services import trail, waiting, wakeups

from ..access import events_reach, visible_events
from ..base import AgentStateAPIView
from ..ids import path_id
from ..schema import PAGES, documented
from ..waiting import Deferred, Waiting
from . import serializers as s

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser

# A comment line at least this often keeps proxies from closing a quiet stream.
KEEP_ALIVE = 15.0
BATCH = 100
# While a visible event waits for a lower id still in flight, read again this often.
UNSETTLED_RETRY = 0.1


def _events(user: _AnyUser, q: dict[str, Any]) -> EventQuerySet[Event]:
    events = visible_events(user).select_related("user", "created_by")
    run_id = q.pop("run_id", None)
    if run_id is not None:
        events = events.of_run(run_id)
    return events.filter(**q)


def _read_after(events: QuerySet[Event], after: int, read: Any) -> tuple[Any, bool, float | None]:
    """A ``Check`` of the feed: ``read`` of the settled events above ``after``; when there
    are none but some are visible, they wait for a lower id: read again shortly."""
    found = read(events.filter(settled(after)).order_by("pk"))
    if found:
        return found, True, None
    unsettled = events.filter(pk__gt=after).exists()
    return found, False, UNSETTLED_RETRY if unsettled else None


class EventsView(AgentStateAPIView):
    @documented(
        parameters=[s.EventFeedQuery, *PAGES],
        responses=s.EventSerializer(many=True),
        operation_id="events_list",
    )
    def get(self, request: Request) -> Response:
        q = self.query(s.EventFeedQuery)
        wait, after = q.pop("wait", None), q.pop("after", None)
        if after is None:  # a page of the trail, newest first
            seen = events_reach(request.user)

            def fetch(offset: int, limit: int) -> tuple[list[Event], int]:
                page = trail.events_page(reach=seen, offset=offset, limit=limit, **q)
                return page.rows, page.total

            return self.paginate_fetched(fetch, s.EventSerializer)
        filters = {k: v for k, v in q.items() if k != "run_id"}
        run_id = q.get("run_id")
        events = _events(request.user, q)

        def page(rows: QuerySet[Event]) -> list[Any]:
            response = self.paginate(rows, s.EventSerializer)
            return response.data if response.data["results"] else []

        def check() -> tuple[Any, bool, float | None]:
            return _read_after(events, after, page)

        if wait is None:
            return self.paginate(events.filter(settled(after)).order_by("pk"), s.EventSerializer)
        empty: dict[str, Any] = {"count": 0, "next": None, "previous": None, "results": []}
        return Waiting(
            check,
            waiting.events_notice(filters, run_id),
            wait,
            lambda data: data or empty,
            key=("events", request.user.pk, request.get_full_path()),
        )


class EventStream(Deferred):
    """What ``EventStreamView`` answers for ``Waitable`` to stream."""

    def __init__(self, events: QuerySet[Event], after: int, wants: Any, key: Any) -> None:
        super().__init__()
        self.events, self.after, self.wants, self.key = events, after, wants, key

    def _check(self, after: int) -> Any:
        def read(rows: QuerySet[Event]) -> list[dict[str, Any]]:
            return list(s.EventSerializer(rows[:BATCH], many=True).data)

        return lambda: _read_after(self.events, after, read)

    @staticmethod
    def _message(event: dict[str, Any]) -> str:
        data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        return f"id: {event['id']}\nevent: {event['kind']}\ndata: {data}\n\n"

    async def _messages(self) -> AsyncIterator[str]:
        after = self.after
        yield ": agentstate events\nretry: 1000\n\n"
        while True:
            batch = await waiting.until(
                self._check(after), self.wants, KEEP_ALIVE, (self.key, after)
            )
            if not batch:
                yield ": keep-alive\n\n"
            for event in batch:
                yield self._message(event)
                after = event["id"]

    def _messages_sync(self) -> Iterator[str]:
        after = self.after
        yield ": agentstate events\nretry: 1000\n\n"
        while True:
            batch = async_to_sync(waiting.until)(self._check(after), self.wants, KEEP_ALIVE)
            if not batch:
                yield ": keep-alive\n\n"
            for event in batch:
                yield self._message(event)
                after = event["id"]

    def _response(self, content: Any) -> StreamingHttpResponse:
        response = StreamingHttpResponse(content, content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: pass each message on at once
        return response

    async def answer(self) -> StreamingHttpResponse:
        return self._response(self._messages())

    def answer_sync(self) -> StreamingHttpResponse:
        return self._response(self._messages_sync())


class EventStreamRenderer(BaseRenderer):
    """What a browser's ``EventSource`` accepts; an error is still JSON."""

    media_type = "text/event-stream"
    format = "sse"

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> bytes:
        return JSONRenderer().render(data)


class EventStreamView(AgentStateAPIView):
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @documented(
        parameters=[s.EventQuery],
        responses={(200, "text/event-stream"): str},
        description="Server-Sent Events: `id:` the event id, `event:` its kind, `data:` "
        "the event as /api/events/ gives it. Resumes after `Last-Event-ID` (which wins "
        "over `after`); without either, starts with the next event. A comment line at "
        "least every 15 seconds.",
        operation_id="events_stream",
    )
    def get(self, request: Request) -> Response:
        q = self.query(s.EventQuery)
        after = q.pop("after", None)
        resume = request.headers.get("Last-Event-ID")
        if resume is not None:
            after = path_id(resume.strip())
            if after is None:
                raise BadInput("Last-Event-ID must be an event id.", field="Last-Event-ID")
        filters = {k: v for k, v in q.items() if k != "run_id"}
        wants = waiting.events_notice(filters, q.get("run_id"))
        key = ("stream", request.user.pk, tuple(sorted(q.items())))
        events = _events(request.user, q)
        if after is None:
            after = wakeups.latest_id()
        return EventStream(events, after, wants, key)
