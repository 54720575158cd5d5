"""A bridge between the OpenAI Agents SDK (``openai-agents``) and agentstate.

When ``Runner.run`` stops on tool calls that need approval, the bridge
keeps the SDK's serialized ``RunState`` in a context variable and files one
agentstate approval request per interrupted call, so reviewers decide in the
admin or over REST. Once every request is decided, ``resume`` (in this or
any other process) loads the state, applies each decision (``approve`` /
``reject``, ``always`` where chosen), resumes the run and adds its usage to
the agentstate run. It is built on the adapters' shared core
(``agentstate.contrib.core``): taking the saved state is a ``pop``, so of any
number of processes resuming one run at once exactly one does; the others are
told the run is busy.

The SDK context of a bridged run is the agentstate run's ``context`` (a JSON
object), read afresh on every resume.

``context_tools`` offers agentstate's function tools (``agentstate.tools``)
to an SDK agent as ``FunctionTool``s, so a model can keep its own context
variables. The SDK is imported here: where it is not installed, importing
this module raises ``ImproperlyConfigured`` naming the extra
(``pip install "django-agentstate[agents]"``). See docs/openai-agents.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

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

from agentstate.contrib import core
from agentstate.contrib.core import (
    BUSY,
    FINISHED,
    STATE_SCOPE,
    WAITING,
    Bridge,
    Call,
    Outcome,
    RemoteStore,
    Review,
    Stop,
    Store,
    UsageDelta,
    decided,
    off_loop,
)

if TYPE_CHECKING:
    from agentstate.contrib.core import ServiceStore as ServiceStore
    from agentstate.contrib.openai_agents_session import SESSION_SCOPE as SESSION_SCOPE
    from agentstate.contrib.openai_agents_session import AgentStateSession as AgentStateSession

__all__ = [
    "BUSY",
    "FINISHED",
    "STATE_SCOPE",
    "WAITING",
    "AgentStateSession",
    "ApprovalBridge",
    "Outcome",
    "RemoteStore",
    "SESSION_SCOPE",
    "Review",
    "ServiceStore",
    "context_tools",
]

logger = logging.getLogger(__name__)


class ApprovalBridge(Bridge):
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
        store: Store | None = None,
        run_config: RunConfig | None = None,
        max_turns: int | None = None,
    ) -> None:
        super().__init__(store=store)
        self.agent = agent
        self.run_config = run_config
        self.max_turns = max_turns

    def start(
        self, input: str | list[Any], *, run_id: str | None = None, context: Any = None
    ) -> Outcome:
        return async_to_sync(self.astart)(input, run_id=run_id, context=context)

    async def astart(
        self, input: str | list[Any], *, run_id: str | None = None, context: Any = None
    ) -> Outcome:
        """Create the agentstate run (its context is the SDK's) and start the agent on ``input``."""
        run_id, context = await self.create_run(run_id, {} if context is None else context)
        return await self._begin(run_id, _Start(input, context))

    # The core's hooks (agentstate.contrib.core.Bridge).

    async def _run(self, run_id: str, input: _Start | _Resume, used: UsageDelta) -> RunResult:
        options: dict[str, Any] = {"run_config": self.run_config}
        if self.max_turns is not None:
            options["max_turns"] = self.max_turns
        if isinstance(input, _Start):
            counted = Usage()
            result = await Runner.run(self.agent, input.input, context=input.context, **options)
        else:
            counted = input.counted
            result = await Runner.run(self.agent, input.state, **options)
        used.update(_usage_delta(result.context_wrapper.usage, counted))
        return result

    async def _stop(self, run_id: str, step: RunResult) -> Stop | None:
        if not step.interruptions:
            return None
        calls = [_call(item) for item in step.interruptions]
        return Stop(step.to_state(), calls, result=step)

    def _keep(self, stop: Stop) -> str:
        state: RunState = stop.state
        return state.to_string()

    async def _restore(self, run_id: str, saved: Any) -> Stop:
        context = await off_loop(self.store.run_context)(run_id)
        return Stop(await RunState.from_string(self.agent, saved, context_override=context))

    async def _answer(self, run_id: str, stop: Stop, reviews: list[Review]) -> _Resume:
        """The state with each interrupted call's decision applied; what the run had
        used before (counted from there on, edited calls run here included)."""
        state: RunState = stop.state
        assert state._context is not None  # a restored state has its context
        counted = _copy_usage(state._context.usage)
        await self._apply_decisions(state, reviews)
        return _Resume(state, counted)

    async def _apply_decisions(self, state: RunState, reviews: list[Review]) -> None:
        """Apply each interrupted call's decided request to the SDK state."""
        by_call = decided(reviews)
        for item in state.get_interruptions():
            review = by_call.get(_call(item).call_id)
            if review is None:
                raise RuntimeError(f"Tool call {item.call_id!r} has no decided approval request.")
            if review.edited:
                # The SDK runs a call only with the model's arguments (it fingerprints
                # each invocation and refuses a changed one): the edited call runs here,
                # and the model's call is answered with its result instead of running.
                state.reject(item, rejection_message=await self._run_edited(state, item, review))
            elif review.approved:
                state.approve(item, always_approve=review.always)
            else:
                state.reject(item, always_reject=review.always, rejection_message=review.refusal)

    async def _run_edited(self, state: RunState, item: ToolApprovalItem, review: Review) -> str:
        """Run the reviewer's edited call of an agent's function tool; what the model hears."""
        tool = next(
            (
                t
                for t in self.agent.tools
                if isinstance(t, FunctionTool) and t.name == review.tool_name
            ),
            None,
        )
        if tool is None:
            return review.not_run(
                "which cannot be run for a tool that is not one of the agent's function tools"
            )
        if review.unrunnable_edit is not None:
            return review.unrunnable_edit
        assert state._context is not None  # a restored state has its context
        edited = json.dumps(review.approved_arguments, ensure_ascii=False)
        context = SDKToolContext(
            state._context.context,
            usage=state._context.usage,
            tool_name=tool.name,
            tool_call_id=item.call_id,
            tool_arguments=edited,
            agent=self.agent,
        )
        return review.ran(await tool.on_invoke_tool(context, edited))


class _Start(NamedTuple):
    """A new run's input: the agent's input and the SDK context."""

    input: str | list[Any]
    context: Any


class _Resume(NamedTuple):
    """A stopped run's input: its state, decisions applied, and the usage counted."""

    state: RunState
    counted: Usage


def _call(item: ToolApprovalItem) -> Call:
    """An interrupted call as filed (a nameless one is refused as bad input)."""
    return Call(item.name or "", item.call_id or "", _arguments(item))


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


def __getattr__(name: str) -> Any:
    # Imported when asked for: each needs the site's settings and models, which a
    # process using RemoteStore (and importing this module) does without.
    if name == "ServiceStore":
        return core.ServiceStore
    if name in ("AgentStateSession", "SESSION_SCOPE"):
        from agentstate.contrib import openai_agents_session

        return getattr(openai_agents_session, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    from agentstate import tools  # the site's: its settings and models

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
