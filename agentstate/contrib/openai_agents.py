"""A bridge between the OpenAI Agents SDK (``openai-agents``) and agentstate.

When ``Runner.run`` stops on tool calls that need approval, the bridge
keeps the SDK's serialized ``RunState`` in a context variable and files one
agentstate approval request per interrupted call, so reviewers decide in the
admin or over REST. Once every request is decided, ``resume`` (in this or
any other process) loads the state, applies each decision (``approve`` /
``reject``, ``always`` where chosen), resumes the run and adds its usage to
the agentstate run. Taking the saved state is a ``pop``, so of any number of
processes resuming one run at once exactly one does; the others are told
the run is busy.

The SDK context of a bridged run is the agentstate run's ``context`` (a JSON
object), read afresh on every resume.

``context_tools`` offers agentstate's function tools (``agentstate.tools``)
to an SDK agent as ``FunctionTool``s, so a model can keep its own context
variables. The SDK is imported here: where it is not installed, importing
this module raises ``ImproperlyConfigured`` naming the extra
(``pip install "django-agentstate[agents]"``). See docs/openai-agents.md.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from django.core.exceptions import ImproperlyConfigured

from agentstate.extras import missing

try:
    from agents import (
        Agent,
        FunctionTool,
        RunConfig,
        RunContextWrapper,
        Runner,
        RunResult,
        RunState,
        Usage,
    )
    from agents.items import ToolApprovalItem
    from agents.tool_context import ToolContext as SDKToolContext
except ImportError as error:
    raise missing("agents", "agentstate.contrib.openai_agents", error) from error
from asgiref.sync import async_to_sync, sync_to_async

from agentstate.contrib.openai_agents_session import SESSION_SCOPE as SESSION_SCOPE
from agentstate.contrib.openai_agents_session import AgentStateSession as AgentStateSession
from agentstate.exceptions import ScopeNotFound, VariableNotFound

logger = logging.getLogger(__name__)

STATE_SCOPE = "agentstate.openai_agents"
"""The scope holding each waiting run's state, one variable per run id."""

FINISHED = "finished"
WAITING = "waiting"
BUSY = "busy"


class UsageDelta(TypedDict):
    """Usage to add to a run, in agentstate's flat form (``runs.add_usage``'s counters)."""

    requests: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int


@dataclass(frozen=True)
class Review:
    """An approval request as the bridge needs it, from either store.

    ``approved_arguments``: what the reviewer approved instead of ``arguments`` (the
    model's), or ``None``; ``arguments_to_run`` is the call a caller should run."""

    id: int
    tool_name: str
    call_id: str
    arguments: Any
    status: str
    always: bool = False
    reason: str = ""
    approved_arguments: Any = None

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    @property
    def edited(self) -> bool:
        """Approved with other arguments than the model's."""
        return self.status == "approved" and self.approved_arguments is not None

    @property
    def arguments_to_run(self) -> Any:
        """The arguments the call may run with: the approved ones if edited, else as filed."""
        return self.approved_arguments if self.edited else self.arguments


@dataclass
class Outcome:
    """Where a bridged run stands after ``start`` or ``resume``.

    ``finished``: ``result`` is the SDK's final result. ``waiting``: the run
    stopped; ``pending`` lists the approval requests still undecided.
    ``busy``: nothing to resume (another process took the state, or the run
    is not stopped).
    """

    run_id: str
    status: str
    result: RunResult | None = None
    pending: list[Review] = field(default_factory=list)

    @property
    def final_output(self) -> Any:
        return self.result.final_output if self.result is not None else None


class ServiceStore:
    """The bridge's storage through agentstate's services (a process of the Django site)."""

    def __init__(self, user: Any = None) -> None:
        self.user = user

    def create_run(self, run_id: str | None, context: Any) -> tuple[str, Any]:
        from agentstate.services import runs

        run = runs.create_run(run_id=run_id, context=context, user=self.user)
        return run.run_id, run.context

    def run_context(self, run_id: str) -> Any:
        from agentstate.services import runs

        return runs.get_run(run_id).context

    def request_approval(self, run_id: str, tool_name: str, call_id: str, arguments: Any) -> Review:
        from agentstate.services import approvals

        request = approvals.request_approval(run_id, tool_name, call_id, arguments, user=self.user)
        return self._review(request)

    def reviews(self, run_id: str) -> list[Review]:
        from agentstate.models import ApprovalRequest

        requests = ApprovalRequest.objects.filter(run__run_id=run_id).order_by("pk")
        return [self._review(request) for request in requests]

    def add_usage(self, run_id: str, **usage: Unpack[UsageDelta]) -> None:
        from agentstate.services import runs

        runs.add_usage(run_id, **usage)

    def keep_state(self, run_id: str, saved: str) -> None:
        from agentstate.services import context

        context.put(STATE_SCOPE, run_id, saved, actor="openai-agents")

    def take_state(self, run_id: str) -> str | None:
        from agentstate.services import context

        try:
            saved: str = context.pop(STATE_SCOPE, run_id, actor="openai-agents")
        except (ScopeNotFound, VariableNotFound):
            return None
        return saved

    @staticmethod
    def _review(request: Any) -> Review:
        return Review(
            request.pk,
            request.tool_name,
            request.call_id,
            request.arguments,
            request.status,
            request.always,
            request.reason,
            request.approved_arguments,
        )


class RemoteStore:
    """The bridge's storage over REST, for processes outside the site.

    ``client`` is an ``agentstate_client.AgentStateClient`` (the separate
    ``agentstate-client`` distribution). The waiting state is a context
    variable of the client's user. REST shows no ``always`` on a request: it
    is read from the run's approval records.
    """

    def __init__(self, client: Any) -> None:
        try:
            from agentstate_client import ScopeNotFound as RemoteScopeNotFound
            from agentstate_client import VariableNotFound as RemoteVariableNotFound
        except ImportError as error:
            raise ImproperlyConfigured(
                "RemoteStore talks to the REST API through agentstate-client: "
                "pip install agentstate-client (client/ in the agentstate repository)."
            ) from error
        self.client = client
        self._absent = (RemoteScopeNotFound, RemoteVariableNotFound)

    def create_run(self, run_id: str | None, context: Any) -> tuple[str, Any]:
        run = self.client.create_run(run_id, context)
        return run["run_id"], run["context"]

    def run_context(self, run_id: str) -> Any:
        return self.client.get_run(run_id)["context"]

    def request_approval(self, run_id: str, tool_name: str, call_id: str, arguments: Any) -> Review:
        request, _created = self.client.request_approval(run_id, tool_name, call_id, arguments)
        return self._review(request, {})

    def reviews(self, run_id: str) -> list[Review]:
        records = self.client.approvals(run_id)
        return [self._review(r, records) for r in self.client.list_approval_requests(run_id=run_id)]

    def add_usage(self, run_id: str, **usage: Unpack[UsageDelta]) -> None:
        self.client.add_usage(run_id, **usage)

    def keep_state(self, run_id: str, saved: str) -> None:
        self.client.put(STATE_SCOPE, run_id, saved)

    def take_state(self, run_id: str) -> str | None:
        try:
            saved: str = self.client.pop(STATE_SCOPE, run_id)
        except self._absent:
            return None
        return saved

    @staticmethod
    def _review(request: dict[str, Any], records: dict[str, Any]) -> Review:
        flag = {"approved": "approved", "rejected": "rejected"}.get(request["status"])
        always = bool(flag) and records.get(request["tool_name"], {}).get(flag) is True
        return Review(
            request["id"],
            request["tool_name"],
            request["call_id"],
            request["arguments"],
            request["status"],
            always,
            request.get("reason") or "",
            request.get("approved_arguments"),
        )


class ApprovalBridge:
    """Runs ``agent`` so that its approval-gated tool calls wait for agentstate reviewers.

    ``start`` and ``resume`` are synchronous (for views, tasks and commands);
    ``astart`` and ``aresume`` are their async forms. ``store`` is where runs,
    requests and states live: ``ServiceStore(user)`` (the default, in the
    Django site) or ``RemoteStore(client)`` (over REST).
    """

    def __init__(
        self,
        agent: Agent[Any],
        *,
        store: ServiceStore | RemoteStore | None = None,
        run_config: RunConfig | None = None,
        max_turns: int | None = None,
    ) -> None:
        self.agent = agent
        self.store = store or ServiceStore()
        self.run_config = run_config
        self.max_turns = max_turns

    def start(
        self, input: str | list[Any], *, run_id: str | None = None, context: Any = None
    ) -> Outcome:
        return async_to_sync(self.astart)(input, run_id=run_id, context=context)

    def resume(self, run_id: str) -> Outcome:
        return async_to_sync(self.aresume)(run_id)

    async def astart(
        self, input: str | list[Any], *, run_id: str | None = None, context: Any = None
    ) -> Outcome:
        """Create the agentstate run (its context is the SDK's) and start the agent on ``input``."""
        run_id, context = await self._db(
            self.store.create_run, run_id, {} if context is None else context
        )
        result = await self._run(input, context=context)
        return await self._settle(run_id, result, counted=Usage())

    async def aresume(self, run_id: str) -> Outcome:
        """Resume a waiting run once every request is decided; ``waiting`` until then."""
        pending = [r for r in await self._db(self.store.reviews, run_id) if r.pending]
        if pending:
            return Outcome(run_id, WAITING, pending=pending)
        saved = await self._db(self.store.take_state, run_id)
        if saved is None:
            return Outcome(run_id, BUSY)
        try:
            context = await self._db(self.store.run_context, run_id)
            state = await RunState.from_string(self.agent, saved, context_override=context)
            assert state._context is not None  # a restored state has its context
            counted = _copy_usage(state._context.usage)
            await self._apply_decisions(run_id, state)
            result = await self._run(state)
        except BaseException:
            await self._db(self.store.keep_state, run_id, saved)
            raise
        return await self._settle(run_id, result, counted=counted)

    async def _db(self, function: Callable[..., Any], *args: Any) -> Any:
        """A store call off the event loop (on the caller's thread under ``start``/``resume``)."""
        return await sync_to_async(function)(*args)

    async def _run(self, input: Any, context: Any = None) -> RunResult:
        options: dict[str, Any] = {"run_config": self.run_config}
        if self.max_turns is not None:
            options["max_turns"] = self.max_turns
        if context is not None:
            options["context"] = context
        return await Runner.run(self.agent, input, **options)

    async def _settle(self, run_id: str, result: RunResult, *, counted: Usage) -> Outcome:
        """Add the new usage; file requests for interruptions, resuming at once when all are decided."""
        while True:
            usage = result.context_wrapper.usage
            delta = _usage_delta(usage, counted)
            if any(delta.values()):
                await self._db(functools.partial(self.store.add_usage, run_id, **delta))
            counted = _copy_usage(usage)
            if not result.interruptions:
                return Outcome(run_id, FINISHED, result=result)
            state = result.to_state()
            reviews = [
                await self._db(
                    self.store.request_approval, run_id, item.name, item.call_id, _arguments(item)
                )
                for item in result.interruptions
            ]
            pending = [r for r in reviews if r.pending]
            if pending:
                await self._db(self.store.keep_state, run_id, state.to_string())
                return Outcome(run_id, WAITING, result=result, pending=pending)
            await self._apply_decisions(run_id, state)
            result = await self._run(state)

    async def _apply_decisions(self, run_id: str, state: RunState) -> None:
        """Apply each interrupted call's decided request to the SDK state."""
        decided = {r.call_id: r for r in await self._db(self.store.reviews, run_id)}
        for item in state.get_interruptions():
            review = decided.get(item.call_id)
            if review is None or review.pending:
                raise RuntimeError(f"Tool call {item.call_id!r} has no decided approval request.")
            if review.edited:
                # The SDK runs a call only with the model's arguments (it fingerprints
                # each invocation and refuses a changed one): the edited call runs here,
                # and the model's call is answered with its result instead of running.
                state.reject(item, rejection_message=await self._run_edited(state, item, review))
            elif review.status == "approved":
                state.approve(item, always_approve=review.always)
            else:
                message = review.reason or (
                    "The approval request expired." if review.status == "expired" else None
                )
                state.reject(item, always_reject=review.always, rejection_message=message)

    async def _run_edited(self, state: RunState, item: ToolApprovalItem, review: Review) -> str:
        """Run the reviewer's edited call of an agent's function tool; what the model hears."""
        edited = json.dumps(review.approved_arguments, ensure_ascii=False)
        tool = next(
            (
                t
                for t in self.agent.tools
                if isinstance(t, FunctionTool) and t.name == review.tool_name
            ),
            None,
        )
        if tool is None:
            return (
                f"A reviewer approved this call only with other arguments, {edited}, which"
                " cannot be run for a tool that is not one of the agent's function tools:"
                " it did not run."
            )
        assert state._context is not None  # a restored state has its context
        context = SDKToolContext(
            state._context.context,
            usage=state._context.usage,
            tool_name=tool.name,
            tool_call_id=item.call_id,
            tool_arguments=edited,
            agent=self.agent,
        )
        output = await tool.on_invoke_tool(context, edited)
        return (
            f"A reviewer approved this call with edited arguments, {edited}; it ran with them"
            f" and returned: {output}"
        )


def _arguments(item: ToolApprovalItem) -> Any:
    raw = item.arguments
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _copy_usage(usage: Usage) -> Usage:
    copy = Usage()
    copy.add(usage)
    return copy


def _usage_delta(usage: Usage, counted: Usage) -> UsageDelta:
    """What ``usage`` adds to what was already counted, in agentstate's flat form."""
    return {
        "requests": usage.requests - counted.requests,
        "input_tokens": usage.input_tokens - counted.input_tokens,
        "output_tokens": usage.output_tokens - counted.output_tokens,
        "total_tokens": usage.total_tokens - counted.total_tokens,
        "cached_tokens": _cached(usage) - _cached(counted),
        "reasoning_tokens": _reasoning(usage) - _reasoning(counted),
    }


def _cached(usage: Usage) -> int:
    return getattr(usage.input_tokens_details, "cached_tokens", 0) or 0


def _reasoning(usage: Usage) -> int:
    return getattr(usage.output_tokens_details, "reasoning_tokens", 0) or 0


# Function tools over context variables.


def context_tools(
    scope: str | Callable[[RunContextWrapper[Any]], str], *, owner: Any = None
) -> list[FunctionTool]:
    """agentstate's context-variable function tools as SDK ``FunctionTool``s.

    ``scope`` is the scope the model's variables live in, or a function of
    the run's context wrapper that names it (e.g. one scope per run). The
    tools answer with the dispatcher's short message and never raise.
    """
    from agentstate import tools

    def make(schema: dict[str, Any]) -> FunctionTool:
        spec = schema.get("function", schema)
        name = spec["name"]

        def call(ctx: SDKToolContext[Any], arguments: str) -> str:
            key = scope(ctx) if callable(scope) else scope
            return tools.dispatch(name, arguments, scope=key, owner=owner)

        async def invoke(ctx: SDKToolContext[Any], arguments: str) -> str:
            return await sync_to_async(call)(ctx, arguments)

        return FunctionTool(
            name=name,
            description=spec.get("description", ""),
            params_json_schema=spec.get("parameters", {"type": "object", "properties": {}}),
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    return [make(schema) for schema in tools.SCHEMAS]
