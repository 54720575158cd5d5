"""``GraphBridge``: a LangGraph graph whose interrupts wait for people in agentstate.

The bridge runs a graph on a thread whose id is also the agentstate run's id.
When the graph stops on ``interrupt(value)``, each interrupt becomes one of:

- a **question**: a pause (``chat_id`` the thread id, ``tool_call_id`` the
  interrupt id, the value as payload) that its owner answers with
  ``answer``, claimed exactly once;
- **approval requests**, for an interrupt raised by LangChain's
  ``HumanInTheLoopMiddleware``: one request per action it asks about
  (``batched`` mode's ``HITLRequest``) or per tool call (``per_call`` mode's
  ``tool_approval``), decided in the admin or over REST; the decisions become
  the middleware's resume value (approve, edit with the reviewer's arguments,
  reject with the reviewer's reason).

The graph resumes with ``Command(resume={interrupt_id: value, ...})`` once
every question of the stop is answered and every request decided: answers
given before then are kept with the bridge's state. That state is kept with
the core's ``wait`` and taken with its ``taking`` (a ``pop``), so of any number
of processes answering or resuming a thread at once exactly one resumes it.
Each step's token usage (what the chat models report) is added to the run.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any, NamedTuple

from asgiref.sync import async_to_sync
from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph.types import Command, Interrupt, StateSnapshot

from agentstate.contrib.core import (
    BUSY,
    WAITING,
    Bridge,
    Call,
    Outcome,
    Question,
    Review,
    Stop,
    Store,
    UsageDelta,
    decided,
    off_loop,
    usage,
)
from agentstate.exceptions import AlreadyClaimed, AlreadyResolved, BadInput, Conflict
from agentstate.validation import check_json, check_key, check_run_id

from .saver import AgentStateSaver, jsonable

__all__ = ["GraphBridge"]

BATCHED = "batched"
PER_CALL = "per_call"


class GraphBridge(Bridge):
    """Runs ``graph`` so that its interrupts wait for agentstate's people.

    ``graph`` is a ``StateGraph`` (compiled here with ``AgentStateSaver()``) or a
    compiled graph with a checkpointer. ``config`` is merged into every run's
    config (e.g. ``recursion_limit``); the bridge sets its ``thread_id`` and adds
    a callback that counts the chat models' usage. ``patience``: how many seconds
    ``answer`` waits for a thread's state that another process holds for a moment
    (to record another answer) before it gives up.
    """

    def __init__(
        self,
        graph: Any,
        *,
        store: Store | None = None,
        config: RunnableConfig | None = None,
        patience: float = 30.0,
    ) -> None:
        super().__init__(store=store)
        self.graph: Pregel[Any, Any, Any, Any] = _compiled(graph)
        self.config: RunnableConfig = config or {}
        self.patience = patience

    # Starting

    def start(self, input: Any, *, thread_id: str | None = None, owner: str) -> Outcome:
        """Run the graph on ``input`` in thread ``thread_id`` (a new UUID when ``None``;
        an existing thread goes on); ``owner`` answers its questions."""
        return async_to_sync(self.astart)(input, thread_id=thread_id, owner=owner)

    async def astart(self, input: Any, *, thread_id: str | None = None, owner: str) -> Outcome:
        """The async form of ``start``."""
        thread_id = str(uuid.uuid4()) if thread_id is None else check_run_id(thread_id, "thread_id")
        check_key(owner, "owner")
        if await self.peek(thread_id) is not None:
            raise Conflict(
                f"Thread {thread_id!r} waits on its interrupts: answer or resume it.",
                field="thread_id",
            )
        thread_id, _context = await self.create_run(thread_id, {}, existing_ok=True)
        return await self._begin(thread_id, _Input(input, owner))

    # Answering a question

    def answer(
        self, thread_id: str, interrupt_id: str, question_id: str, value: Any, *, owner: str
    ) -> Outcome:
        """Answer a question the thread waits on (its pause claimed exactly once:
        ``AlreadyClaimed`` for a second answer); the graph resumes once every
        question and request of the stop is answered and decided."""
        return async_to_sync(self.aanswer)(thread_id, interrupt_id, question_id, value, owner=owner)

    async def aanswer(
        self, thread_id: str, interrupt_id: str, question_id: str, value: Any, *, owner: str
    ) -> Outcome:
        """The async form of ``answer``."""
        check_json(value, "value")
        try:
            await off_loop(self.store.claim)(thread_id, interrupt_id, owner, question_id)
        except AlreadyResolved as error:
            # answered, and the graph went on: to the caller, claimed like any answered one
            raise AlreadyClaimed("The question was already answered.") from error

        async def record(saved: Any) -> Outcome:
            asked = saved.get("questions", []) if isinstance(saved, dict) else []
            if interrupt_id not in {q["interrupt_id"] for q in asked}:
                raise BadInput(
                    f"Thread {thread_id!r} does not wait on interrupt {interrupt_id!r}.",
                    field="interrupt_id",
                )
            saved["answers"][interrupt_id] = value
            await self.wait(thread_id, saved)
            return Outcome(thread_id, WAITING)

        # The state is away only for a moment while the question is unanswered (another
        # answer being recorded, a resume finding this one missing, the stop being
        # kept): nobody can resume the graph without this answer.
        deadline = time.monotonic() + self.patience
        delay = 0.01
        while (await self.taking(thread_id, record)).status == BUSY:
            if time.monotonic() > deadline:
                raise Conflict(
                    f"Thread {thread_id!r} kept no state for {self.patience} seconds: "
                    "it does not wait on this bridge.",
                    field="thread_id",
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)
        return await self.aresume(thread_id)

    # Resuming

    async def aresume(self, run_id: str) -> Outcome:
        """The core's ``aresume``; a waiting outcome also lists the unanswered questions."""
        outcome = await super().aresume(run_id)
        if outcome.status == WAITING and not outcome.questions:
            outcome.questions = _kept_stop(await self.peek(run_id)).unanswered
        return outcome

    # The core's hooks (agentstate.contrib.core.Bridge).

    def _config(self, thread_id: str, counter: _UsageCounter) -> RunnableConfig:
        config: RunnableConfig = {**self.config}
        config["configurable"] = {**self.config.get("configurable", {}), "thread_id": thread_id}
        callbacks = self.config.get("callbacks")
        if isinstance(callbacks, BaseCallbackManager):
            manager = callbacks.copy()
            manager.add_handler(counter, inherit=True)
            config["callbacks"] = manager
        else:
            config["callbacks"] = [*(callbacks or []), counter]
        return config

    async def _run(self, thread_id: str, input: _Input, used: UsageDelta) -> _Step:
        """One run of the graph until it ends or stops (its usage counted even if it
        fails), and where it stands."""
        counter = _UsageCounter()
        try:
            await self.graph.ainvoke(input.input, self._config(thread_id, counter))
        finally:
            used.update(counter.delta())
        snapshot = await self.graph.aget_state(self._config(thread_id, _UsageCounter()))
        return _Step(snapshot, input.owner)

    def _result(self, step: _Step) -> Any:
        return step.snapshot.values

    async def _stop(self, thread_id: str, step: _Step) -> Stop | None:
        """The graph's interrupts: questions asked, approval requests' calls to file."""
        snapshot, owner = step
        if not snapshot.interrupts:
            return None
        saved: dict[str, Any] = {"owner": owner, "questions": [], "answers": {}, "approvals": []}
        questions: list[Question] = []
        calls: list[Call] = []
        messages = _messages(snapshot.values)
        for interrupt in snapshot.interrupts:
            stop = _approval_stop(interrupt, messages)
            if stop is None:
                question = await self.ask(thread_id, interrupt.id, owner, jsonable(interrupt.value))
                questions.append(question)
                saved["questions"].append(
                    {
                        "interrupt_id": question.interrupt_id,
                        "question_id": question.question_id,
                        "value": question.value,
                    }
                )
                continue
            calls += [Call(a["name"], a["call_id"], a["args"]) for a in stop["actions"]]
            saved["approvals"].append(stop)
        return Stop(saved, calls, questions)

    def _keep(self, stop: Stop) -> dict[str, Any]:
        saved: dict[str, Any] = stop.state
        return saved

    async def _restore(self, thread_id: str, saved: Any) -> Stop:
        return _kept_stop(saved)

    async def _answer(self, thread_id: str, stop: Stop, reviews: list[Review]) -> _Input:
        """``Command(resume=...)``: the answers, and each approval interrupt's decisions
        as the middleware takes them."""
        saved = stop.state
        by_call = decided(reviews)
        resume: dict[str, Any] = dict(saved["answers"])
        for approval in saved["approvals"]:
            resume[approval["interrupt_id"]] = _resume_value(approval, by_call)
        return _Input(Command(resume=resume), saved["owner"])


class _Input(NamedTuple):
    """What a run of the graph takes: its input, and who answers its questions."""

    input: Any
    owner: str


class _Step(NamedTuple):
    """Where a run of the graph left its thread, and who answers its questions."""

    snapshot: StateSnapshot
    owner: str


def _compiled(graph: Any) -> Pregel[Any, Any, Any, Any]:
    if isinstance(graph, StateGraph):
        return graph.compile(checkpointer=AgentStateSaver())
    if not isinstance(graph, Pregel):
        raise BadInput(
            f"graph must be a StateGraph or a compiled graph (Pregel), not {type(graph).__name__}.",
            field="graph",
        )
    if not isinstance(graph.checkpointer, BaseCheckpointSaver):
        raise BadInput(
            "The compiled graph has no checkpointer, so it cannot stop and resume: compile "
            "it with one (builder.compile(checkpointer=AgentStateSaver())) or pass the "
            "StateGraph builder and the bridge compiles it so.",
            field="graph",
        )
    return graph


# Interrupts of HumanInTheLoopMiddleware


def _messages(values: Any) -> list[Any]:
    messages = values.get("messages") if isinstance(values, dict) else None
    return list(messages) if isinstance(messages, list) else []


def _approval_stop(interrupt: Interrupt, messages: list[Any]) -> dict[str, Any] | None:
    """The actions of an interrupt of ``HumanInTheLoopMiddleware``, as kept: ``None``
    for any other interrupt (a question)."""
    value = interrupt.value
    if not isinstance(value, dict):
        return None
    if value.get("type") == "tool_approval" and isinstance(value.get("tool_call_id"), str):
        action = {
            "name": value.get("name", ""),
            "call_id": value["tool_call_id"],
            "args": jsonable(value.get("args")),
            "allowed": _allowed(getattr(interrupt, "response_schema", None)),
        }
        return {"interrupt_id": interrupt.id, "mode": PER_CALL, "actions": [action]}
    requests, configs = value.get("action_requests"), value.get("review_configs")
    if not (isinstance(requests, list) and isinstance(configs, list)):
        return None
    allowed = {c.get("action_name"): c.get("allowed_decisions") for c in configs}
    ids = _tool_call_ids(requests, messages)
    actions = [
        {
            "name": request.get("name", ""),
            "call_id": ids[index] or f"{interrupt.id}:{index}",
            "args": jsonable(request.get("args")),
            "allowed": allowed.get(request.get("name")),
        }
        for index, request in enumerate(requests)
    ]
    return {"interrupt_id": interrupt.id, "mode": BATCHED, "actions": actions}


def _tool_call_ids(requests: list[dict[str, Any]], messages: list[Any]) -> list[str | None]:
    """The model's id of each requested action's tool call: the gated calls of the last
    AIMessage, in order, matched by name and arguments (``None`` where none matches)."""
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    calls = list(last.tool_calls) if last is not None else []
    ids: list[str | None] = []
    start = 0
    for request in requests:
        found = None
        for index in range(start, len(calls)):
            call = calls[index]
            if call["name"] == request.get("name") and call["args"] == request.get("args"):
                found, start = call.get("id") or None, index + 1
                break
        ids.append(found)
    return ids


def _allowed(schema: Any) -> list[str] | None:
    """The decision types a ``per_call`` interrupt's response schema (JSON Schema)
    allows: its discriminator's, or the one type of a one-decision schema."""
    if not isinstance(schema, dict):
        return None
    mapping = (schema.get("discriminator") or {}).get("mapping")
    if isinstance(mapping, dict) and mapping:
        return sorted(mapping)
    kind = (schema.get("properties") or {}).get("type")
    if isinstance(kind, dict) and isinstance(kind.get("const"), str):
        return [kind["const"]]
    return None


def _resume_value(stop: dict[str, Any], by_call: dict[str, Review]) -> Any:
    """The middleware's resume value for a stop's decided requests."""
    decisions = []
    for action in stop["actions"]:
        review = by_call.get(action["call_id"])
        if review is None:
            raise Conflict(
                f"Tool call {action['call_id']!r} has no decided approval request.",
                field="call_id",
            )
        decisions.append(_decision(review, action.get("allowed")))
    if stop["mode"] == PER_CALL:
        return decisions[0]
    return {"decisions": decisions}


def _decision(review: Review, allowed: Iterable[str] | None) -> dict[str, Any]:
    """A reviewer's decision as the middleware takes it."""
    permitted = set(allowed or ("approve", "edit", "reject"))
    if review.edited:
        if "edit" in permitted and isinstance(review.approved_arguments, dict):
            return {
                "type": "edit",
                "edited_action": {"name": review.tool_name, "args": review.approved_arguments},
            }
        return {
            "type": "reject",
            "message": review.not_run("which this tool's review does not accept as an edit"),
        }
    if review.approved:
        return {"type": "approve"}
    if review.reason or review.status != "rejected":
        return {"type": "reject", "message": review.refusal}
    # rejected without a reason: the middleware tells the model not to retry the call
    return {"type": "reject"}


def _kept_stop(saved: Any) -> Stop:
    """A kept stop: its questions and the answers given (none of either for a thread
    that keeps no state)."""
    if not isinstance(saved, dict):
        return Stop(saved)
    questions = [
        Question(q["interrupt_id"], q["question_id"], q["value"])
        for q in saved.get("questions", [])
    ]
    return Stop(saved, questions=questions, answers=saved.get("answers", {}))


# Usage


class _UsageCounter(BaseCallbackHandler):
    """Counts the chat model calls of a run and the usage their messages report."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._counters = usage()

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        counted = usage(requests=1)
        for generations in response.generations:
            for generation in generations:
                message = generation.message if isinstance(generation, ChatGeneration) else None
                metadata = getattr(message, "usage_metadata", None)
                if not metadata:
                    continue
                details_in = metadata.get("input_token_details") or {}
                details_out = metadata.get("output_token_details") or {}
                counted["input_tokens"] += metadata.get("input_tokens", 0)
                counted["output_tokens"] += metadata.get("output_tokens", 0)
                counted["total_tokens"] += metadata.get("total_tokens", 0)
                counted["cached_tokens"] += details_in.get("cache_read", 0) or 0
                counted["reasoning_tokens"] += details_out.get("reasoning", 0) or 0
        with self._lock:
            for key, value in counted.items():
                self._counters[key] += value  # type: ignore[literal-required]

    def delta(self) -> UsageDelta:
        with self._lock:
            return usage(**self._counters)
