"""``AsyncAgentStateClient``: the waiting calls of ``AgentStateClient`` for asyncio
code (httpx's ``AsyncClient``): ``wait_for_decision`` and ``follow_events``, an
async generator that reconnects and resumes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from .client import ApprovalRequest, Event
from .common import FOLLOW_PAGE, HTTP_SLACK, ClientBase, events_filters, wait_chunk
from .errors import ApprovalRequestNotFound, NotFound, ServiceUnavailable, Unreachable


class AsyncAgentStateClient(ClientBase[httpx.AsyncBaseTransport, httpx.AsyncClient]):
    """Constructed as ``AgentStateClient`` (``ClientBase``), with an httpx
    ``AsyncBaseTransport`` as ``transport``."""

    def _open(self, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(**options)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncAgentStateClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _get(
        self,
        path: str,
        params: Mapping[str, Any],
        *,
        timeout: float | None = None,
        not_found: type[NotFound] = NotFound,
    ) -> Any:
        """A GET (safe to repeat), sent and repeated as ``AgentStateClient._request``."""
        options = self._options(params, None, timeout)
        for attempt in range(self.retries + 1):
            try:
                response = await self._http.get(path, **options)
            except httpx.TransportError as error:
                request = f"GET {path}"
                await asyncio.sleep(
                    self._retry_unanswered(request, error, attempt, idempotent=True)
                )
                continue
            delay = self._retry_answered(response, attempt, idempotent=True)
            if delay is None:
                return self._answer(response, not_found).json()
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def get_approval_request(self, request_id: int) -> ApprovalRequest:
        return await self._get(
            f"approval-requests/{int(request_id)}/", {}, not_found=ApprovalRequestNotFound
        )

    async def wait_for_decision(self, request_id: int, timeout: float) -> ApprovalRequest:
        """As ``AgentStateClient.wait_for_decision``."""
        deadline = time.monotonic() + timeout
        while True:
            wait = wait_chunk(deadline)
            request: ApprovalRequest = await self._get(
                f"approval-requests/{int(request_id)}/",
                {"wait": wait},
                timeout=None if wait is None else wait + HTTP_SLACK,
                not_found=ApprovalRequestNotFound,
            )
            if request["status"] != "pending" or wait is None:
                return request

    async def follow_events(
        self,
        after: int | None = None,
        *,
        kind: str | None = None,
        object_type: str | None = None,
        object_id: str | None = None,
        run_id: str | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[Event]:
        """As ``AgentStateClient.follow_events``, an async generator."""
        filters = events_filters(kind, object_type, object_id, run_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        failures = 0
        while True:
            try:
                if after is None:
                    newest = await self._get("events/", {**filters, "page_size": 1})
                    after = int(newest["results"][0]["id"]) if newest["results"] else 0
                wait = wait_chunk(deadline)
                page = await self._get(
                    "events/",
                    {**filters, "after": after, "wait": wait, "page_size": FOLLOW_PAGE},
                    timeout=None if wait is None else wait + HTTP_SLACK,
                )
            except (Unreachable, ServiceUnavailable):
                if deadline is not None and time.monotonic() >= deadline:
                    return
                await asyncio.sleep(self._delay(min(failures, 5)))
                failures += 1
                continue
            failures = 0
            for event in page["results"]:
                yield event
                after = event["id"]
            if wait is None:
                return
