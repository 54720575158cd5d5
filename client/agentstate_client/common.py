"""What ``AgentStateClient`` and ``AsyncAgentStateClient`` share: their settings,
the requests they build, which failures they repeat and how long they wait, and
the error an answer is. Each client only sends, with httpx's ``Client`` or
``AsyncClient``; ``client.py`` says which requests are safe to repeat.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Generator, Mapping
from typing import Any, Generic, TypeVar

import httpx

from . import errors
from .errors import APIError, Expired, NotFound, Unreachable

# The clients' retries are logged as the synchronous client's.
logger = logging.getLogger("agentstate_client.client")


_BY_CODE: dict[str, type[APIError]] = {
    cls.code: cls
    for cls in (
        errors.InvalidInput,
        errors.NotAuthenticated,
        errors.PermissionDenied,
        errors.NotFound,
        errors.ScopeNotFound,
        errors.VariableNotFound,
        errors.PauseNotFound,
        errors.RunNotFound,
        errors.ApprovalRequestNotFound,
        errors.UserNotFound,
        errors.Conflict,
        errors.TypeConflict,
        errors.VersionMismatch,
        errors.AlreadyClaimed,
        errors.AlreadyResolved,
        errors.QuestionSuperseded,
        errors.NotClaimed,
        errors.NotPending,
        errors.RunExists,
        errors.AlreadyDecided,
        errors.AlreadyRevoked,
        errors.BudgetExceeded,
        errors.HistoryForked,
        errors.AlreadyVoted,
        errors.AlreadyConsumed,
        errors.NotApproved,
        errors.ArgumentsChanged,
        errors.SelfApproval,
        errors.NotAReviewer,
        errors.VotesRequired,
        errors.RuleExists,
        errors.Expired,
        errors.BodyTooLarge,
        errors.ServiceUnavailable,
    )
}
_BY_CODE["parse_error"] = errors.InvalidInput
_BY_STATUS: dict[int, type[APIError]] = {
    400: errors.InvalidInput,
    401: errors.NotAuthenticated,
    403: errors.PermissionDenied,
    404: errors.NotFound,
    409: errors.Conflict,
    410: errors.Expired,
    412: errors.VersionMismatch,
    413: errors.BodyTooLarge,
    503: errors.ServiceUnavailable,
}


def error_from_response(
    response: httpx.Response,
    *,
    not_found: type[NotFound] = NotFound,
    expired: type[Expired] = Expired,
) -> APIError:
    """The exception for an error response, by its ``code`` first, else its status.

    ``not_found`` and ``expired`` refine the generic codes by the endpoint
    (``expired`` is one code for pauses and approval requests alike).
    """
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    code = body.get("code") if isinstance(body.get("code"), str) else None
    detail = body.get("detail") if isinstance(body.get("detail"), str) else None
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(response.status_code, APIError)
    if cls is NotFound:
        cls = not_found
    elif cls is Expired:
        cls = expired
    return cls(
        detail or f"HTTP {response.status_code}: {response.reason_phrase}",
        field=body.get("field") if isinstance(body.get("field"), str) else None,
        status=response.status_code,
        code=code,
        response=response,
    )


# Waiting: each long-poll asks for at most this many seconds (the server's
# AGENTSTATE["MAX_WAIT"] is 60 by default), and allows this much more for the answer.
WAIT_CHUNK = 50.0
HTTP_SLACK = 10.0
FOLLOW_PAGE = 500


def wait_chunk(deadline: float | None) -> float | None:
    """The next long-poll's ``wait``: what is left of the time (at most ``WAIT_CHUNK``),
    or None when nothing is left (then the request answers at once)."""
    if deadline is None:
        return WAIT_CHUNK
    left = deadline - time.monotonic()
    return min(left, WAIT_CHUNK) if left > 0.001 else None


def events_filters(
    kind: str | None, object_type: str | None, object_id: str | None, run_id: str | None
) -> dict[str, str]:
    given = {"kind": kind, "object_type": object_type, "object_id": object_id, "run_id": run_id}
    return {name: value for name, value in given.items() if value is not None}


Auth = httpx.Auth | tuple[str, str] | None


class TokenAuth(httpx.Auth):
    """DRF's ``Authorization: Token KEY``."""

    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Token {self.token}"
        yield request


Transport = TypeVar("Transport", httpx.BaseTransport, httpx.AsyncBaseTransport)
HTTP = TypeVar("HTTP", httpx.Client, httpx.AsyncClient)


class ClientBase(Generic[Transport, HTTP]):
    """The settings of a client and its retry policy; a subclass opens its httpx
    client (``_open``) and sends each request with it.

    ``base_url`` is where ``agentstate.api.urls`` is mounted (the demo:
    ``http://host:8000/api/``). Authenticate with ``token=`` (DRF authtoken)
    or ``auth=(username, password)`` (basic) or any ``httpx.Auth``.
    ``retries`` is how many times a safe request is repeated after the
    first attempt; ``backoff`` the first delay in seconds, doubled each time
    up to ``max_backoff``.
    """

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
        transport: Transport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if token is not None and auth is not None:
            raise ValueError("Give token or auth, not both.")
        self.retries = max(0, retries)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._http: HTTP = self._open(
            base_url=base_url.rstrip("/") + "/",
            auth=TokenAuth(token) if token is not None else auth,
            timeout=timeout,
            transport=transport,
            headers={"Accept": "application/json", **(headers or {})},
        )

    def _open(self, **options: Any) -> HTTP:
        """The httpx client that sends this client's requests, made with ``options``."""
        raise NotImplementedError

    @staticmethod
    def _options(
        params: Mapping[str, Any] | None, json: Any, timeout: float | None
    ) -> dict[str, Any]:
        """A request's keyword arguments to httpx: the parameters given (``None``: left
        out), the JSON body, a long-poll's longer timeout."""
        options: dict[str, Any] = {}
        if timeout is not None:  # a long-poll: longer than the wait it asks for
            options["timeout"] = timeout
        params = {k: v for k, v in (params or {}).items() if v is not None}
        if params:  # an empty mapping would drop the query of a ``next`` link
            options["params"] = params
        if json is not None:
            options["json"] = json
        return options

    def _retry_unanswered(
        self, request: str, error: httpx.TransportError, attempt: int, *, idempotent: bool
    ) -> float:
        """The delay before repeating ``request`` (``"METHOD path"``), which got no
        answer; ``Unreachable`` when it may not be repeated: it was the last attempt,
        or it may have reached the server and repeating it is not safe."""
        # Nothing reached the server: repeating is safe for any request.
        unsent = isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout))
        if attempt == self.retries or not (unsent or idempotent):
            raise Unreachable(f"{request}: {error}") from error
        return self._delay(attempt)

    def _retry_answered(
        self, response: httpx.Response, attempt: int, *, idempotent: bool
    ) -> float | None:
        """The delay before repeating a request answered 503 (``Retry-After``
        honoured), or ``None``: the answer stands."""
        if response.status_code == 503 and idempotent and attempt < self.retries:
            return self._delay(attempt, response.headers.get("Retry-After"))
        return None

    def _delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Exponential backoff with jitter, at least ``Retry-After`` (both capped)."""
        delay = min(self.max_backoff, self.backoff * 2**attempt) * random.uniform(0.5, 1.0)
        if retry_after and retry_after.isdigit():
            delay = max(delay, min(self.max_backoff, float(retry_after)))
        logger.info("agentstate: retrying in %.2fs", delay)
        return delay

    @staticmethod
    def _answer(
        response: httpx.Response,
        not_found: type[NotFound] = NotFound,
        expired: type[Expired] = Expired,
    ) -> httpx.Response:
        """``response`` if it succeeded, else its error raised."""
        if response.is_success:
            return response
        raise error_from_response(response, not_found=not_found, expired=expired)
