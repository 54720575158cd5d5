"""``AsyncAgentStateClient``: the waiting calls of ``AgentStateClient`` for asyncio
code (httpx's ``AsyncClient``): ``wait_for_decision`` and ``follow_events``, an
async generator that reconnects and resumes."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from .client import (
    FOLLOW_PAGE,
    HTTP_SLACK,
    ApprovalRequest,
    Auth,
    Event,
    TokenAuth,
    error_from_response,
    events_filters,
    wait_chunk,
)
from .errors import ApprovalRequestNotFound, NotFound, ServiceUnavailable, Unreachable


class AsyncAgentStateClient:
    """``base_url``, ``token``/``auth``: as ``AgentStateClient``'s."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        auth: Auth = None,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if token is not None and auth is not None:
            raise ValueError("Give token or auth, not both.")
        self.retries, self.backoff, self.max_backoff = max(0, retries), backoff, max_backoff
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + "/",
            auth=TokenAuth(token) if token is not None else auth,
            timeout=timeout,
            transport=transport,
            headers={"Accept": "application/json", **(headers or {})},
        )

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
        """A GET (safe to repeat): retried on a transport error or a 503, with backoff."""
        params = {k: v for k, v in params.items() if v is not None}
        kwargs: dict[str, Any] = {"timeout": timeout} if timeout is not None else {}
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = await self._http.get(path, params=params, **kwargs)
            except httpx.TransportError as error:
                if last:
                    raise Unreachable(f"GET {path}: {error}") from error
                await self._sleep(attempt)
                continue
            if response.status_code == 503 and not last:
                await self._sleep(attempt)
                continue
            if response.is_success:
                return response.json()
            raise error_from_response(response, not_found=not_found)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _sleep(self, attempt: int) -> None:
        delay = min(self.max_backoff, self.backoff * 2**attempt)
        await asyncio.sleep(delay * random.uniform(0.5, 1.0))

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
                await self._sleep(min(failures, 5))
                failures += 1
                continue
            failures = 0
            for event in page["results"]:
                yield event
                after = event["id"]
            if wait is None:
                return
