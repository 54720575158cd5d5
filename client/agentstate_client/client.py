"""A typed, synchronous Python client for agentstate's REST API.

Agent runtimes that are not the Django site talk to it over HTTP; this
client lets a Python one do so with the names of the in-process services
and errors of the same names (``agentstate_client.errors``). It needs only
``httpx``: it imports neither Django nor the app.

Retries are bounded, with exponential backoff, and only where repeating a
request cannot change its outcome: reads, idempotent writes (a put without
``if_version``, setting a run's context, approval records, an approval
request), on a transport error or a 503. Any request is retried when the
connection could not even be opened, since then nothing reached the server.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any, Literal, TypedDict, TypeVar
from urllib.parse import quote

import httpx

from .common import (
    FOLLOW_PAGE,
    HTTP_SLACK,
    ClientBase,
    events_filters,
    wait_chunk,
)
from .errors import (
    APIError,
    ApprovalRequestExpired,
    ApprovalRequestNotFound,
    Expired,
    NotFound,
    PauseExpired,
    PauseNotFound,
    PolicyNotFound,
    RunNotFound,
    ScopeNotFound,
    ServiceUnavailable,
    Unreachable,
    UserNotFound,
)

logger = logging.getLogger(__name__)


E = TypeVar("E", bound=APIError)


class Keep(enum.Enum):
    """``set_user_budget(period=KEEP)``: the period as it is."""

    KEEP = "keep"


KEEP = Keep.KEEP


# Response shapes.


class Event(TypedDict):
    id: int
    kind: str
    actor: str
    user: str | None
    object_type: str
    object_id: str
    created_by: str | None
    owner: str
    details: dict[str, Any]
    created_at: str


class PutResult(TypedDict):
    scope: str
    name: str
    value: Any
    version: int


class PushResult(TypedDict):
    scope: str
    name: str
    length: int
    version: int


class ListResult(TypedDict):
    scope: str
    name: str
    values: list[Any]
    length: int


class ScopeInfo(TypedDict):
    scope: str
    owner: str | None
    variables: int
    created_at: str


class Pause(TypedDict, total=False):
    chat_id: str
    tool_call_id: str
    owner: str
    question_id: str
    status: str
    expires_at: str
    payload: Any


class Usage(TypedDict):
    requests: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int


ApprovalRecords = dict[str, dict[str, bool | list[str]]]


class RunJSON(TypedDict):
    run_id: str
    context: Any
    usage: Usage
    approvals: ApprovalRecords


class Counters(TypedDict):
    requests: int
    input_tokens: int
    output_tokens: int
    total_tokens: int


class Caps(TypedDict):
    requests: int | None
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None


class RunBudget(TypedDict):
    caps: Caps
    used: Counters
    remaining: Caps


class UserBudget(RunBudget):
    period: str | None
    resets_at: str | None


class ApprovalPolicy(TypedDict):
    id: int
    tool_name: str
    decision: str
    user: str | None
    arguments: dict[str, Any] | None
    expires_at: str | None
    reason: str
    created_by: str | None
    created_at: str
    revoked_at: str | None


class ApprovalRequest(TypedDict):
    id: int
    run_id: str
    tool_name: str
    call_id: str
    arguments: Any
    status: str
    decided_by: str | None
    decided_at: str | None
    reason: str
    policy: int | None
    approved_arguments: Any
    created_at: str


class AgentStateClient(ClientBase[httpx.BaseTransport, httpx.Client]):
    """Every endpoint of the REST API, one method each; constructed as ``ClientBase``
    says (``base_url``, ``token`` or ``auth``, ``retries``, ``backoff``...)."""

    def _open(self, **options: Any) -> httpx.Client:
        return httpx.Client(**options)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> AgentStateClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # The one place that sends: what to repeat and the errors are ClientBase's.

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool,
        not_found: type[NotFound] = NotFound,
        expired: type[Expired] = Expired,
        timeout: float | None = None,
    ) -> httpx.Response:
        options = self._options(params, json, timeout)
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(method, path, **options)
            except httpx.TransportError as error:
                request = f"{method} {path}"
                time.sleep(self._retry_unanswered(request, error, attempt, idempotent=idempotent))
                continue
            delay = self._retry_answered(response, attempt, idempotent=idempotent)
            if delay is None:
                return self._answer(response, not_found, expired)
            time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    def _pages(self, path: str, params: Mapping[str, Any]) -> Iterator[Any]:
        """Every result of a paginated list, following ``next`` links."""
        page = self._json("GET", path, params=params, idempotent=True)
        while True:
            yield from page["results"]
            if not page.get("next"):
                return
            page = self._json("GET", page["next"], idempotent=True)

    # Context variables.

    def get(
        self, scope: str, names: list[str] | None = None, *, owner: str | None = None
    ) -> dict[str, Any]:
        """A map with an entry for every requested name (``None`` when absent); no names: all."""
        params = {"scope": scope, "name": list(names or []), "owner": owner}
        return self._json(
            "GET", "context/", params=params, idempotent=True, not_found=ScopeNotFound
        )["values"]

    def get_list(
        self, scope: str, name: str, *, last: int | None = None, owner: str | None = None
    ) -> ListResult:
        """A list's elements in order, only its last ``last`` when given, and its whole
        ``length``; a string reads as a one-element list."""
        params = {"scope": scope, "name": name, "last": last, "owner": owner}
        return self._json(
            "GET", "context/list/", params=params, idempotent=True, not_found=ScopeNotFound
        )

    def put(
        self,
        scope: str,
        name: str,
        value: Any,
        *,
        if_version: int | None = None,
        owner: str | None = None,
    ) -> PutResult:
        """Store ``value``; with ``if_version``, only over that version (0: absent)."""
        body = _body(scope=scope, name=name, value=value, if_version=if_version, owner=owner)
        body["value"] = value  # null is a value, not an omission
        return self._json("PUT", "context/", json=body, idempotent=if_version is None)

    def delete(self, scope: str, name: str, *, owner: str | None = None) -> None:
        params = {"scope": scope, "name": name, "owner": owner}
        self._request(
            "DELETE", "context/", params=params, idempotent=False, not_found=ScopeNotFound
        )

    def push(self, scope: str, name: str, value: Any, *, owner: str | None = None) -> PushResult:
        """Append ``value`` (absent: ``[value]``; a string ``s``: ``[s, value]``); never retried."""
        body = _body(scope=scope, name=name, owner=owner)
        body["value"] = value
        return self._json("POST", "context/push/", json=body, idempotent=False)

    def pop(
        self,
        scope: str,
        name: str,
        mode: Literal["LIFO", "FIFO"] | str = "LIFO",
        *,
        owner: str | None = None,
    ) -> Any:
        """Remove and return a string, or a list's last (LIFO) or first (FIFO) element."""
        body = _body(scope=scope, name=name, mode=mode, owner=owner)
        return self._json(
            "POST", "context/pop/", json=body, idempotent=False, not_found=ScopeNotFound
        )["value"]

    def list_scopes(
        self, prefix: str | None = None, *, owner: str | None = None, page_size: int | None = None
    ) -> list[ScopeInfo]:
        return list(
            self._pages("scopes/", {"prefix": prefix, "owner": owner, "page_size": page_size})
        )

    def delete_scope(self, scope: str, *, owner: str | None = None) -> None:
        params = {"scope": scope, "owner": owner}
        self._request("DELETE", "scopes/", params=params, idempotent=False, not_found=ScopeNotFound)

    def get_state(
        self, scope: str, key: str, default: Any = None, *, owner: str | None = None
    ) -> Any:
        """The value, or ``default`` when absent, the scope unknown or the server unreachable."""
        try:
            values = self.get(scope, [key], owner=owner)
        except ScopeNotFound:
            return default
        except Exception:
            logger.warning(
                "get_state(%r, %r) failed; returning the default", scope, key, exc_info=True
            )
            return default
        # REST answers null for an absent name, so a stored null reads as absent here.
        value = values.get(key)
        return default if value is None else value

    def set_state(self, scope: str, key: str, value: Any, *, owner: str | None = None) -> PutResult:
        """Like ``put``, raising on any failure: a lost write is never silent."""
        return self.put(scope, key, value, owner=owner)

    # Paused runs.

    def put_pause(
        self,
        chat_id: str,
        tool_call_id: str,
        owner: str,
        payload: Any,
        *,
        ttl_seconds: int | None = None,
    ) -> Pause:
        """Keep a pause pending under a new question id (in the result), replacing any earlier."""
        body = _body(
            chat_id=chat_id, tool_call_id=tool_call_id, owner=owner, ttl_seconds=ttl_seconds
        )
        body["payload"] = payload
        return self._json("POST", "pauses/", json=body, idempotent=False)

    def list_pauses(
        self,
        *,
        status: str | None = None,
        owner: str | None = None,
        chat_id: str | None = None,
        tool_call_id: str | None = None,
        page_size: int | None = None,
    ) -> list[Pause]:
        params = {
            "status": status,
            "owner": owner,
            "chat_id": chat_id,
            "tool_call_id": tool_call_id,
            "page_size": page_size,
        }
        return list(self._pages("pauses/", params))

    def claim(
        self, chat_id: str, tool_call_id: str, question_id: str, *, owner: str | None = None
    ) -> Pause:
        """Claim a pending pause exactly once; its payload is in the result. Never retried."""
        body = _body(
            chat_id=chat_id, tool_call_id=tool_call_id, question_id=question_id, owner=owner
        )
        return self._pause_call("claim/", body)

    def resolve(self, chat_id: str, tool_call_id: str) -> Pause:
        return self._pause_call("resolve/", {"chat_id": chat_id, "tool_call_id": tool_call_id})

    def cancel(self, chat_id: str, tool_call_id: str) -> None:
        self._request(
            "POST",
            "pauses/cancel/",
            json={"chat_id": chat_id, "tool_call_id": tool_call_id},
            idempotent=False,
            not_found=PauseNotFound,
            expired=PauseExpired,
        )

    def _pause_call(self, action: str, body: dict[str, Any]) -> Pause:
        return self._json(
            "POST",
            "pauses/" + action,
            json=body,
            idempotent=False,
            not_found=PauseNotFound,
            expired=PauseExpired,
        )

    # Runs, usage and approval records.

    def create_run(self, run_id: str | None = None, context: Any = None) -> RunJSON:
        """A new run (``run_id`` generated when omitted); ``RunExists`` if taken."""
        body = _body(run_id=run_id)
        if context is not None:
            body["context"] = context
        return self._json("POST", "runs/", json=body, idempotent=False)

    def get_run(self, run_id: str) -> RunJSON:
        return self._run_call("GET", run_id, "")

    def update_run(self, run_id: str, context: Any) -> RunJSON:
        """Replace the run's ``context``."""
        return self._run_call("PATCH", run_id, "", json={"context": context}, idempotent=True)

    def add_usage(
        self,
        run_id: str,
        requests: int = 1,
        input_tokens: int = 0,
        output_tokens: int = 0,
        total_tokens: int | None = None,
        cached_tokens: int = 0,
        reasoning_tokens: int = 0,
    ) -> Usage:
        """Add to the run's usage (total defaults to input + output); never retried."""
        body = _body(
            requests=requests,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=total_tokens,
            cached_tokens=cached_tokens,
            reasoning_tokens=reasoning_tokens,
        )
        return self._run_call("POST", run_id, "usage/", json=body, idempotent=False)

    def is_tool_approved(self, run_id: str, tool_name: str, call_id: str) -> bool | None:
        """``True``, ``False``, or ``None`` while the call is undecided."""
        params = {"tool_name": tool_name, "call_id": call_id}
        return self._run_call("GET", run_id, "approvals/", params=params)["approved"]

    def approvals(self, run_id: str) -> ApprovalRecords:
        return self._run_call("GET", run_id, "approvals/")

    def consume_approval(
        self, run_id: str, tool_name: str, call_id: str, arguments_digest: str
    ) -> dict[str, Any]:
        """Use the call's approval once, for the arguments whose SHA-256 (of their
        canonical JSON) is ``arguments_digest``: ``AlreadyConsumed`` after the first
        time, ``NotApproved`` or ``ArgumentsChanged`` otherwise. Not retried: a retry
        of a use that went through would answer ``AlreadyConsumed``."""
        body = {"tool_name": tool_name, "call_id": call_id, "arguments_digest": arguments_digest}
        return self._run_call("POST", run_id, "approvals/consume/", json=body)

    def approve(
        self, run_id: str, tool_name: str, call_id: str, *, always: bool = False
    ) -> ApprovalRecords:
        body = {"tool_name": tool_name, "call_id": call_id, "always": always}
        return self._run_call("POST", run_id, "approvals/approve/", json=body, idempotent=True)

    def reject(
        self, run_id: str, tool_name: str, call_id: str, *, always: bool = False
    ) -> ApprovalRecords:
        body = {"tool_name": tool_name, "call_id": call_id, "always": always}
        return self._run_call("POST", run_id, "approvals/reject/", json=body, idempotent=True)

    def rebuild_approvals(self, run_id: str, records: ApprovalRecords) -> ApprovalRecords:
        """Replace every approval record of the run."""
        return self._run_call("PUT", run_id, "approvals/", json=records, idempotent=True)

    def request_approval(
        self, run_id: str, tool_name: str, call_id: str, arguments: Any = None
    ) -> tuple[ApprovalRequest, bool]:
        """The run's request for this call and whether it was created now (idempotent)."""
        body: dict[str, Any] = {"tool_name": tool_name, "call_id": call_id}
        if arguments is not None:
            body["arguments"] = arguments
        response = self._request(
            "POST",
            _run_path(run_id, "approval-requests/"),
            json=body,
            idempotent=True,
            not_found=RunNotFound,
        )
        return response.json(), response.status_code == 201

    def _run_call(
        self,
        method: str,
        run_id: str,
        action: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool | None = None,
    ) -> Any:
        return self._json(
            method,
            _run_path(run_id, action),
            params=params,
            json=json,
            idempotent=method == "GET" if idempotent is None else idempotent,
            not_found=RunNotFound,
        )

    # Budgets.

    def run_budget(self, run_id: str) -> RunBudget:
        """The run's budget: ``{"caps", "used", "remaining"}``."""
        return self._run_call("GET", run_id, "budget/")

    def set_run_budget(self, run_id: str, **caps: int | None) -> RunBudget:
        """Set the caps named (``None`` removes one; the others are kept); takes
        ``agentstate.change_budget``."""
        return self._run_call("PUT", run_id, "budget/", json=caps, idempotent=True)

    def user_budget(self, username: str) -> UserBudget:
        """The user's budget over every run the user created, with its ``period`` and
        ``resets_at``."""
        return self._json(
            "GET", _user_path(username, "budget/"), idempotent=True, not_found=UserNotFound
        )

    def set_user_budget(
        self, username: str, *, period: str | None | Keep = KEEP, **caps: int | None
    ) -> UserBudget:
        """Set the caps named, and ``period`` (``None``, ``"day"`` or ``"month"``) unless
        ``KEEP``; takes ``agentstate.change_budget``."""
        body: dict[str, Any] = dict(caps)
        if period is not KEEP:
            body["period"] = period
        return self._json(
            "PUT",
            _user_path(username, "budget/"),
            json=body,
            idempotent=True,
            not_found=UserNotFound,
        )

    # The review queue.

    def list_approval_requests(
        self,
        *,
        status: str | None = None,
        tool_name: str | None = None,
        run_id: str | None = None,
        page_size: int | None = None,
    ) -> list[ApprovalRequest]:
        params = {
            "status": status,
            "tool_name": tool_name,
            "run_id": run_id,
            "page_size": page_size,
        }
        return list(self._pages("approval-requests/", params))

    def get_approval_request(self, request_id: int) -> ApprovalRequest:
        return self._json(
            "GET",
            f"approval-requests/{int(request_id)}/",
            idempotent=True,
            not_found=ApprovalRequestNotFound,
        )

    def decide(
        self,
        request_id: int,
        decision: Literal["approve", "reject"],
        *,
        always: bool = False,
        reason: str = "",
        arguments: Any = None,
    ) -> ApprovalRequest:
        """Approve or reject a pending request exactly once; never retried. ``arguments``,
        approving only: what to run instead of the filed arguments."""
        return self._json(
            "POST",
            f"approval-requests/{int(request_id)}/decide/",
            json={
                "decision": decision,
                "always": always,
                "reason": reason,
                **({} if arguments is None else {"arguments": arguments}),
            },
            idempotent=False,
            not_found=ApprovalRequestNotFound,
            expired=ApprovalRequestExpired,
        )

    # Waiting without polling: long-polls that the server answers on a change.

    def wait_for_decision(self, request_id: int, timeout: float) -> ApprovalRequest:
        """The request once it is decided or expired (at once if it is), or as it stands
        (``pending``) after ``timeout`` seconds: long-polls of at most ``WAIT_CHUNK``
        seconds each (``?wait=``), so no proxy sees a silent request for long."""
        deadline = time.monotonic() + timeout
        while True:
            wait = wait_chunk(deadline)
            request: ApprovalRequest = self._json(
                "GET",
                f"approval-requests/{int(request_id)}/",
                params={"wait": wait},
                idempotent=True,
                not_found=ApprovalRequestNotFound,
                timeout=None if wait is None else wait + HTTP_SLACK,
            )
            if request["status"] != "pending" or wait is None:
                return request

    def follow_events(
        self,
        after: int | None = None,
        *,
        kind: str | None = None,
        object_type: str | None = None,
        object_id: str | None = None,
        run_id: str | None = None,
        timeout: float | None = None,
    ) -> Iterator[Event]:
        """Every event the caller may see above ``after`` (``None``: from the next one
        on), oldest first, each exactly once, waiting for new ones (``?after=&wait=``).
        A lost connection or a 503 is retried with backoff and the feed resumes
        after the last event yielded. Ends after ``timeout`` seconds if given."""
        filters = events_filters(kind, object_type, object_id, run_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        failures = 0
        while True:
            try:
                if after is None:
                    after = self._latest_event_id(filters)
                wait = wait_chunk(deadline)
                page = self._json(
                    "GET",
                    "events/",
                    params={**filters, "after": after, "wait": wait, "page_size": FOLLOW_PAGE},
                    idempotent=True,
                    timeout=None if wait is None else wait + HTTP_SLACK,
                )
            except (Unreachable, ServiceUnavailable):
                if deadline is not None and time.monotonic() >= deadline:
                    return
                time.sleep(self._delay(min(failures, 5)))
                failures += 1
                continue
            failures = 0
            for event in page["results"]:
                yield event
                after = event["id"]
            if wait is None:
                return

    def _latest_event_id(self, filters: Mapping[str, Any]) -> int:
        newest = self._json("GET", "events/", params={**filters, "page_size": 1}, idempotent=True)[
            "results"
        ]
        return int(newest[0]["id"]) if newest else 0

    # Approval policies (agentstate.decide_approvalrequest).

    def list_policies(
        self,
        *,
        tool_name: str | None = None,
        user: str | None = None,
        active: bool | None = None,
        page_size: int | None = None,
    ) -> list[ApprovalPolicy]:
        params = {
            "tool_name": tool_name,
            "user": user,
            "active": None if active is None else ("true" if active else "false"),
            "page_size": page_size,
        }
        return list(self._pages("approval-policies/", params))

    def create_policy(
        self,
        tool_name: str,
        decision: Literal["approve", "reject"],
        *,
        user: str | None = None,
        arguments: dict[str, Any] | None = None,
        expires_at: str | None = None,
        reason: str = "",
    ) -> ApprovalPolicy:
        """A standing decision of later calls of ``tool_name`` in ``user``'s runs (a
        username; ``None``: everyone's); ``expires_at`` ISO 8601. Never retried."""
        return self._json(
            "POST",
            "approval-policies/",
            json=_body(
                tool_name=tool_name,
                decision=decision,
                user=user,
                arguments=arguments,
                expires_at=expires_at,
                reason=reason,
            ),
            idempotent=False,
        )

    def revoke_policy(self, policy_id: int) -> ApprovalPolicy:
        """Revoke a policy now; ``AlreadyRevoked`` if it was."""
        return self._json(
            "POST",
            f"approval-policies/{int(policy_id)}/revoke/",
            idempotent=False,
            not_found=PolicyNotFound,
        )


def _body(**fields: Any) -> dict[str, Any]:
    """A request body without the optional fields left as ``None``."""
    return {k: v for k, v in fields.items() if v is not None}


def _run_path(run_id: str, action: str) -> str:
    return f"runs/{quote(run_id, safe='')}/{action}"


def _user_path(username: str, action: str) -> str:
    return f"users/{quote(username, safe='')}/{action}"
