"""A bridge between Pydantic AI and agentstate: deferred tool calls decided by reviewers.

A Pydantic AI agent whose output types include ``DeferredToolRequests`` ends
a run early when the model calls a tool that needs approval (a tool with
``requires_approval=True``, or one that raises ``ApprovalRequired``). The
bridge then keeps the run's message history (serialized with
``ModelMessagesTypeAdapter``) in a context variable and files one agentstate
approval request per call in ``DeferredToolRequests.approvals``, so reviewers
decide in the admin or over REST. Once every request is decided, ``resume``
(in this or any other process) turns the decisions into
``DeferredToolResults`` (approve: ``ToolApproved``, with the reviewer's
arguments as ``override_args`` when edited; reject or expired:
``ToolDenied`` with the reviewer's reason), runs the agent on from the kept
history, and adds each step's token usage to the agentstate run. A run that
stops again files the new calls and waits again. It is built on the
adapters' shared core (``agentstate.contrib.core``): taking the kept history
is a ``pop``, so of any number of processes resuming one run at once exactly
one does; the others are told the run is busy.

Calls that must run outside the agent (``DeferredToolRequests.calls``:
``CallDeferred``, external tools) are not bridged: a run that stops on one
raises ``UnsupportedDeferral``. Pydantic AI is imported here: where it is not
installed, importing this module raises ``MissingExtra`` naming the extra
(``pip install "django-agentstate[pydantic-ai]"``). See docs/pydantic-ai.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from agentstate.extras import missing

try:
    from pydantic_ai import (
        AgentRunResult,
        DeferredToolRequests,
        DeferredToolResults,
        ModelMessage,
        ModelMessagesTypeAdapter,
        RunUsage,
        ToolApproved,
        ToolCallPart,
        ToolDenied,
        UsageLimits,
        UserContent,
    )
    from pydantic_ai.agent import AbstractAgent
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings
except ImportError as error:
    raise missing("pydantic-ai", "agentstate.contrib.pydantic_ai", error) from error
from asgiref.sync import async_to_sync
from pydantic import ValidationError

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
from agentstate.exceptions import ApprovalRequestNotFound, BadInput, Conflict

__all__ = [
    "BUSY",
    "FINISHED",
    "STATE_SCOPE",
    "WAITING",
    "DeferredBridge",
    "Outcome",
    "RemoteStore",
    "Review",
    "ServiceStore",
    "UnsupportedDeferral",
]

if TYPE_CHECKING:
    from agentstate.contrib.service_store import ServiceStore

DepsT = TypeVar("DepsT")

Prompt = str | Sequence[UserContent] | None


def __getattr__(name: str) -> Any:
    if name == "ServiceStore":  # the core's, imported when asked for (it needs the models)
        return core.ServiceStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnsupportedDeferral(BadInput):
    """A run stopped on deferred calls the bridge does not file: calls to run outside
    the agent (``DeferredToolRequests.calls``), which only the caller can answer."""

    code = "unsupported_deferral"
    default_detail = "The run stopped on deferred calls that are not approvals."


class DeferredBridge(Bridge, Generic[DepsT]):
    """Runs ``agent`` so that its approval-gated tool calls wait for agentstate reviewers.

    ``agent``'s output types must include ``DeferredToolRequests`` (e.g.
    ``output_type=[str, DeferredToolRequests]``). ``start`` and ``resume`` are
    synchronous (for views, tasks and commands); ``astart`` and ``aresume`` are
    their async forms. ``store`` is where runs, requests and histories live:
    ``ServiceStore(user)`` (the default, in the Django site) or
    ``RemoteStore(client)`` (over REST).

    ``deps`` builds the agent's dependencies for each step of a run, in
    whichever process runs it, from the run id and the agentstate run's context
    (read afresh on every resume): ``deps(run_id, context)``, called off the event
    loop (it may query the database). Without it the
    agent runs with ``deps=None``. ``model``, ``model_settings`` and
    ``usage_limits`` are passed to every ``agent.run`` (each step is one run,
    so a usage limit holds per step).
    """

    def __init__(
        self,
        agent: AbstractAgent[DepsT, Any],
        *,
        store: Store | None = None,
        deps: Callable[[str, Any], DepsT] | None = None,
        model: Model | str | None = None,
        model_settings: ModelSettings | None = None,
        usage_limits: UsageLimits | None = None,
    ) -> None:
        super().__init__(store=store)
        self.agent = agent
        self.deps = deps
        self.model = model
        self.model_settings = model_settings
        self.usage_limits = usage_limits

    def start(self, prompt: Prompt, *, run_id: str | None = None, context: Any = None) -> Outcome:
        """Create the agentstate run and run the agent on ``prompt`` (see ``astart``)."""
        return async_to_sync(self.astart)(prompt, run_id=run_id, context=context)

    async def astart(
        self, prompt: Prompt, *, run_id: str | None = None, context: Any = None
    ) -> Outcome:
        """Create the agentstate run (``RunExists`` when ``run_id`` is taken) with
        ``context`` (a JSON object, ``{}`` by default) and run the agent on ``prompt``:
        ``finished``, or ``waiting`` on the approval requests it filed."""
        run_id, context = await self.create_run(run_id, {} if context is None else context)
        return await self._begin(run_id, _Input(context, prompt))

    async def file(self, run_id: str, calls: Iterable[Call]) -> list[Review]:
        """The core's ``file``, refusing a call whose id names an earlier, different
        request of the run (``Conflict``)."""
        calls = list(calls)
        reviews = await super().file(run_id, calls)
        _check_filed(run_id, calls, reviews)
        return reviews

    # The core's hooks (agentstate.contrib.core.Bridge).

    async def _run(self, run_id: str, input: _Input, used: UsageDelta) -> _Step:
        options: dict[str, Any] = {
            "message_history": input.history,
            "deferred_tool_results": input.results,
            "model": self.model,
            "model_settings": self.model_settings,
            "usage_limits": self.usage_limits,
        }
        if self.deps is not None:
            # off the event loop, so that it may query the database
            options["deps"] = await off_loop(self.deps)(run_id, input.context)
        result = await self.agent.run(input.prompt, **options)
        used.update(_usage_delta(result.usage))
        return _Step(result, input.context)

    def _result(self, step: _Step) -> AgentRunResult[Any]:
        return step.result

    async def _stop(self, run_id: str, step: _Step) -> Stop | None:
        requests = step.result.output
        if not isinstance(requests, DeferredToolRequests):
            return None
        if requests.calls:
            names = ", ".join(sorted({part.tool_name for part in requests.calls}))
            raise UnsupportedDeferral(
                f"Run {run_id!r} stopped on calls to run outside the agent ({names}): "
                "DeferredBridge files approvals only; answer external calls with "
                "Pydantic AI's DeferredToolResults.calls yourself."
            )
        calls = [_call(part) for part in requests.approvals]
        waiting = _Waiting(
            step.result.all_messages(), [call.call_id for call in calls], step.context
        )
        return Stop(waiting, calls, result=step.result)

    def _keep(self, stop: Stop) -> dict[str, Any]:
        return _dump(stop.state.history, stop.state.call_ids)

    async def _restore(self, run_id: str, saved: Any) -> Stop:
        history, call_ids = _load(run_id, saved)
        context = await off_loop(self.store.run_context)(run_id) if self.deps else None
        return Stop(_Waiting(history, call_ids, context))

    async def _answer(self, run_id: str, stop: Stop, reviews: list[Review]) -> _Input:
        waiting: _Waiting = stop.state
        results = _results(run_id, waiting.call_ids, reviews)
        return _Input(waiting.context, None, waiting.history, results)


class _Input(NamedTuple):
    """What one ``agent.run`` takes: the run's context (for ``deps``) and a prompt, or
    the history and the decided calls it goes on from."""

    context: Any
    prompt: Prompt = None
    history: list[ModelMessage] | None = None
    results: DeferredToolResults | None = None


class _Step(NamedTuple):
    result: AgentRunResult[Any]
    context: Any


class _Waiting(NamedTuple):
    """A stop: the run's messages, the calls it waits on, the run's context."""

    history: list[ModelMessage]
    call_ids: list[str]
    context: Any


def _call(part: ToolCallPart) -> Call:
    """A deferred call as filed: its arguments as a JSON object (malformed ones as
    Pydantic AI keeps them, ``{"INVALID_JSON": raw}``)."""
    return Call(part.tool_name, part.tool_call_id, part.args_as_dict())


def _check_filed(run_id: str, calls: list[Call], reviews: list[Review]) -> None:
    """Refuse a call whose id names an earlier, different request of the run: its
    decision is not this call's (a model that reuses call ids)."""
    for call, review in zip(calls, reviews, strict=True):
        if (review.tool_name, review.arguments) != (call.tool_name, call.arguments):
            raise Conflict(
                f"Run {run_id!r} already has an approval request for call id "
                f"{call.call_id!r}, of another call ({review.tool_name} with "
                f"{review.arguments!r}); its decision cannot answer this one."
            )


def _results(run_id: str, call_ids: list[str], reviews: list[Review]) -> DeferredToolResults:
    """The decided requests of the calls the run stopped on, as Pydantic AI's results."""
    by_call = decided(reviews)
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
    for call_id in call_ids:
        review = by_call.get(call_id)
        if review is None:
            raise ApprovalRequestNotFound(
                f"Tool call {call_id!r} of run {run_id!r} has no decided approval request."
            )
        approvals[call_id] = _decision(review)
    return DeferredToolResults(approvals=approvals)


def _decision(review: Review) -> ToolApproved | ToolDenied:
    """A decided request as Pydantic AI's approval result."""
    if not review.approved:
        return ToolDenied(review.refusal)
    if not review.edited:
        return ToolApproved()
    if review.unrunnable_edit is not None:
        return ToolDenied(review.unrunnable_edit)
    return ToolApproved(override_args=review.approved_arguments)


def _dump(history: list[ModelMessage], call_ids: list[str]) -> dict[str, Any]:
    """What a stopped run keeps: its messages (JSON) and the calls it waits on."""
    return {
        "messages": ModelMessagesTypeAdapter.dump_python(history, mode="json"),
        "calls": call_ids,
    }


def _load(run_id: str, saved: Any) -> tuple[list[ModelMessage], list[str]]:
    """The kept messages and call ids (``BadInput`` when they are not this bridge's)."""
    if not (
        isinstance(saved, dict)
        and isinstance(saved.get("calls"), list)
        and all(isinstance(call_id, str) for call_id in saved["calls"])
    ):
        raise BadInput(f"The state kept for run {run_id!r} is not a Pydantic AI bridge's.")
    try:
        history = ModelMessagesTypeAdapter.validate_python(saved.get("messages"))
    except ValidationError as error:
        raise BadInput(
            f"The message history kept for run {run_id!r} is not Pydantic AI's: {error}"
        ) from error
    return history, list(saved["calls"])


def _usage_delta(usage: RunUsage) -> UsageDelta:
    """A step's usage in agentstate's flat form (each ``agent.run`` counts its own)."""
    return {
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "cached_tokens": usage.cache_read_tokens,
        "reasoning_tokens": usage.output_reasoning_tokens,
    }
