"""What every framework adapter shares: a run that stops for people and resumes once.

An adapter (``openai_agents.ApprovalBridge``, ``langgraph.GraphBridge``,
``pydantic_ai.DeferredBridge``) subclasses ``Bridge`` and adds only what its
framework needs: how to run it, how to read the calls it stopped on, and how
to turn the reviewers' decisions into its resume value. The core does the rest,
the same way for all of them:

- a stopped run files one approval request per gated call (``file``), or
  one pause per question (``ask``), decided in the admin or over REST;
- its framework state is kept in a context variable (``wait``), as the text of
  ``{"bridge": name, "state": state}``, and taken back by a ``pop`` (``aresume``), so of any number of processes resuming one
  run at once exactly one does and the others are told ``busy``; a resume
  that fails puts the state back as it was;
- each step's token usage is added to the agentstate run (``add_usage``);
- a bridge registered under a name (``agentstate.contrib.register``) is
  resumed by the Celery task ``agentstate.tasks.resume_run`` once the last
  pending request of its waiting run is decided.

Where the state and the requests live is the bridge's ``store``:
``ServiceStore`` (the default, inside the Django site) or ``RemoteStore``
(over REST, through ``agentstate-client``). See docs/bridges.md.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, NamedTuple, ParamSpec, TypedDict, TypeVar, Unpack

from asgiref.sync import async_to_sync, sync_to_async
from django.core.exceptions import ImproperlyConfigured

from agentstate.exceptions import BadInput, ScopeNotFound, VariableNotFound

STATE_SCOPE = "agentstate.bridges"
"""The scope holding each waiting run's framework state, one variable per run id."""

FINISHED = "finished"
WAITING = "waiting"
BUSY = "busy"

# The name of the bridge the run being resumed waited on (set while ``taking`` goes on),
# which a bridge without a name of its own keeps for the run's next stop.
_resuming: ContextVar[str | None] = ContextVar("agentstate_resuming", default=None)

P = ParamSpec("P")
R = TypeVar("R")


class UsageDelta(TypedDict):
    """Usage to add to a run, in agentstate's flat form (``runs.add_usage``'s counters)."""

    requests: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int


def usage(**counters: int) -> UsageDelta:
    """A ``UsageDelta`` with the counters given and every other one 0."""
    delta: UsageDelta = {
        "requests": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "total_tokens": 0,
        "cached_tokens": 0,
        "reasoning_tokens": 0,
    }
    delta.update(counters)  # type: ignore[typeddict-item]  # the keys are the counters'
    return delta


class Call(NamedTuple):
    """A gated tool call a stopped run waits on, as filed for review."""

    tool_name: str
    call_id: str
    arguments: Any = None


@dataclass(frozen=True)
class Review:
    """An approval request as a bridge needs it, from either store.

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
    def approved(self) -> bool:
        return self.status == "approved"

    @property
    def edited(self) -> bool:
        """Approved with other arguments than the model's."""
        return self.approved and self.approved_arguments is not None

    @property
    def arguments_to_run(self) -> Any:
        """The arguments the call may run with: the approved ones if edited, else as filed."""
        return self.approved_arguments if self.edited else self.arguments

    @property
    def refusal(self) -> str:
        """What to tell the model of a call that may not run: the reviewer's reason, or
        why there is none."""
        if self.reason:
            return self.reason
        if self.status == "expired":
            return "The approval request expired before anybody decided it."
        return "A reviewer rejected this call."


@dataclass(frozen=True)
class Question:
    """A waiting pause of a run: answer it with ``question_id``."""

    interrupt_id: str
    question_id: str
    value: Any


@dataclass
class Outcome:
    """Where a bridged run stands after a start, an answer or a resume.

    ``finished``: ``result`` is the framework's final result. ``waiting``: the
    run stopped; ``pending`` lists its undecided approval requests and
    ``questions`` its unanswered pauses. ``busy``: nothing to resume (another
    process took the state, or the run is not stopped).
    """

    run_id: str
    status: str
    result: Any = None
    pending: list[Review] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def thread_id(self) -> str:
        """The run id, under LangGraph's name for it."""
        return self.run_id

    @property
    def final_output(self) -> Any:
        """The final result's ``final_output`` (the Agents SDK's and Pydantic AI's name)."""
        return getattr(self.result, "final_output", getattr(self.result, "output", None))


class ServiceStore:
    """A bridge's storage through agentstate's services (a process of the Django site).

    ``user`` creates the runs and files the requests (``None``: no user)."""

    def __init__(self, user: Any = None) -> None:
        self.user = user

    def create_run(
        self, run_id: str | None, context: Any, existing_ok: bool = False
    ) -> tuple[str, Any]:
        """A new run (``RunExists`` when taken), or with ``existing_ok`` the run of that
        id as it is: ``(run_id, context)``."""
        from agentstate.exceptions import RunExists
        from agentstate.services import runs

        try:
            run = runs.create_run(run_id=run_id, context=context, user=self.user)
        except RunExists:
            if not existing_ok or run_id is None:
                raise
            run = runs.get_run(run_id)
        return run.run_id, run.context

    def run_context(self, run_id: str) -> Any:
        from agentstate.services import runs

        return runs.get_run(run_id).context

    def request_approval(self, run_id: str, call: Call) -> Review:
        from agentstate.services import approvals

        request = approvals.request_approval(run_id, *call, by=self.user)
        return self._review(request)

    def reviews(self, run_id: str) -> list[Review]:
        from agentstate.models import ApprovalRequest
        from agentstate.services import approvals

        requests = approvals.with_current_status(
            ApprovalRequest.objects.filter(run__run_id=run_id)
        ).order_by("pk")
        return [self._review(request) for request in requests]

    def add_usage(self, run_id: str, **usage: Unpack[UsageDelta]) -> None:
        from agentstate.services import runs

        runs.add_usage(run_id, **usage)

    def ask(self, run_id: str, interrupt_id: str, owner: str, value: Any) -> Question:
        from agentstate.services import pauses

        question_id = pauses.put(run_id, interrupt_id, owner, value, by=self.user)
        return Question(interrupt_id, question_id, value)

    def claim(self, run_id: str, interrupt_id: str, owner: str, question_id: str) -> None:
        from agentstate.services import pauses

        pauses.claim(run_id, interrupt_id, owner, question_id, by=self.user)

    def resolve(self, run_id: str, interrupt_id: str) -> None:
        from agentstate.services import pauses

        pauses.resolve(run_id, interrupt_id, by=self.user)

    def keep_state(self, run_id: str, saved: str) -> None:
        from agentstate.services import context

        context.put(STATE_SCOPE, run_id, saved, by="bridge")

    def peek_state(self, run_id: str) -> str | None:
        from agentstate.services import context

        kept: str | None = context.get_state(STATE_SCOPE, run_id)
        return kept

    def take_state(self, run_id: str) -> str | None:
        from agentstate.services import context

        try:
            kept: str = context.pop(STATE_SCOPE, run_id, by="bridge")
        except (ScopeNotFound, VariableNotFound):
            return None
        return kept

    @staticmethod
    def _review(request: Any) -> Review:
        return Review(
            request.pk,
            request.tool_name,
            request.call_id,
            request.arguments,
            getattr(request, "current_status", request.status),
            request.always,
            request.reason,
            request.approved_arguments,
        )


class RemoteStore:
    """A bridge's storage over REST, for processes outside the site.

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

    def create_run(
        self, run_id: str | None, context: Any, existing_ok: bool = False
    ) -> tuple[str, Any]:
        from agentstate_client import RunExists as RemoteRunExists

        try:
            run = self.client.create_run(run_id, context)
        except RemoteRunExists:
            if not existing_ok or run_id is None:
                raise
            run = self.client.get_run(run_id)
        return run["run_id"], run["context"]

    def run_context(self, run_id: str) -> Any:
        return self.client.get_run(run_id)["context"]

    def request_approval(self, run_id: str, call: Call) -> Review:
        request, _created = self.client.request_approval(run_id, *call)
        return self._review(request, {})

    def reviews(self, run_id: str) -> list[Review]:
        records = self.client.approvals(run_id)
        return [self._review(r, records) for r in self.client.list_approval_requests(run_id=run_id)]

    def add_usage(self, run_id: str, **usage: Unpack[UsageDelta]) -> None:
        self.client.add_usage(run_id, **usage)

    def ask(self, run_id: str, interrupt_id: str, owner: str, value: Any) -> Question:
        pause = self.client.put_pause(run_id, interrupt_id, owner, value)
        return Question(interrupt_id, pause["question_id"], value)

    def claim(self, run_id: str, interrupt_id: str, owner: str, question_id: str) -> None:
        self.client.claim(run_id, interrupt_id, question_id, owner=owner)

    def resolve(self, run_id: str, interrupt_id: str) -> None:
        self.client.resolve(run_id, interrupt_id)

    def keep_state(self, run_id: str, saved: str) -> None:
        self.client.put(STATE_SCOPE, run_id, saved)

    def peek_state(self, run_id: str) -> str | None:
        kept: str | None = self.client.get_state(STATE_SCOPE, run_id)
        return kept

    def take_state(self, run_id: str) -> str | None:
        try:
            kept: str = self.client.pop(STATE_SCOPE, run_id)
        except self._absent:
            return None
        return kept

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


Store = ServiceStore | RemoteStore


def off_loop(function: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``function`` (a store's, which talks to the database or the server) as a coroutine
    function that runs it off the event loop, in Django's thread for the database."""
    return sync_to_async(function)


class Bridge(abc.ABC):
    """The base of the framework adapters (see the module's docs).

    Subclasses implement ``_continue``: resume the framework from the state they
    kept, with the run's decided requests. Everything else a stopped run needs is
    here. ``name`` is set by ``agentstate.contrib.register``; a run waiting on a
    named bridge is resumed by a Celery worker once it is decided.
    """

    name: str | None = None

    def __init__(self, *, store: Store | None = None) -> None:
        self.store: Store = store or ServiceStore()

    # Resuming: the same for every framework.

    def resume(self, run_id: str) -> Outcome:
        """Continue a waiting run once every request is decided; ``waiting`` until then,
        ``busy`` when another process took it (or nothing waits)."""
        return async_to_sync(self.aresume)(run_id)

    async def aresume(self, run_id: str) -> Outcome:
        """The async form of ``resume``."""
        reviews = await off_loop(self.store.reviews)(run_id)
        pending = [r for r in reviews if r.pending]
        if pending:
            return Outcome(run_id, WAITING, pending=pending)
        return await self.taking(run_id, lambda saved: self._continue(run_id, saved, reviews))

    async def taking(self, run_id: str, go_on: Callable[[Any], Awaitable[Outcome]]) -> Outcome:
        """Take the run's kept state (exactly once across processes) and go on with it;
        ``busy`` when there is none. If going on fails, the state is put back as it
        was, so that the run can be resumed again."""
        kept = await off_loop(self.store.take_state)(run_id)
        if kept is None:
            return Outcome(run_id, BUSY)
        resuming = None
        try:
            taken = _unpacked(run_id, kept)
            resuming = _resuming.set(taken.get("bridge"))
            return await go_on(taken["state"])
        except BaseException:
            await off_loop(self.store.keep_state)(run_id, kept)
            raise
        finally:
            if resuming is not None:
                _resuming.reset(resuming)

    @abc.abstractmethod
    async def _continue(self, run_id: str, saved: Any, reviews: list[Review]) -> Outcome:
        """Resume the framework from ``saved`` (what ``wait`` kept) with the run's
        ``reviews``, none of them pending."""

    # The steps a subclass takes when its framework stops or moves on.

    async def create_run(
        self, run_id: str | None, context: Any, *, existing_ok: bool = False
    ) -> tuple[str, Any]:
        """The agentstate run, new (or with ``existing_ok`` as it is): its id and context."""
        return await off_loop(self.store.create_run)(run_id, context, existing_ok)

    async def file(self, run_id: str, calls: Iterable[Call]) -> list[Review]:
        """One approval request per gated call, in order (an existing one as it is;
        a new one may be decided at once by the run's records or a policy)."""
        request = off_loop(self.store.request_approval)
        return [await request(run_id, call) for call in calls]

    async def ask(self, run_id: str, interrupt_id: str, owner: str, value: Any) -> Question:
        """A pause waiting for ``owner``'s answer to ``value``."""
        return await off_loop(self.store.ask)(run_id, interrupt_id, owner, value)

    async def wait(self, run_id: str, saved: Any) -> None:
        """Keep the framework state of a run that stops (JSON), for ``aresume``, waiting
        on this bridge's name; a bridge without one, resuming a run that waited on a
        named bridge (``taking``), keeps that name, so the run still resumes by itself."""
        name = self.name or _resuming.get()
        kept = json.dumps({"bridge": name, "state": saved}, ensure_ascii=False)
        await off_loop(self.store.keep_state)(run_id, kept)

    async def peek(self, run_id: str) -> Any:
        """The framework state a waiting run keeps, without taking it (``None``: none)."""
        kept = await off_loop(self.store.peek_state)(run_id)
        return None if kept is None else _unpacked(run_id, kept)["state"]

    async def add_usage(self, run_id: str, delta: UsageDelta) -> None:
        """Add a step's usage to the run (nothing when every counter is 0)."""
        if any(delta.values()):
            await off_loop(self.store.add_usage)(run_id, **delta)


def _unpacked(run_id: str, kept: Any) -> dict[str, Any]:
    """What ``wait`` kept: ``{"bridge": name, "state": state}`` (``BadInput`` for
    anything else in the run's variable)."""
    try:
        unpacked = json.loads(kept)
    except (TypeError, ValueError):
        unpacked = None
    if not isinstance(unpacked, dict) or "state" not in unpacked:
        raise BadInput(
            f"The variable {run_id!r} of the scope {STATE_SCOPE!r} holds no bridge's state."
        )
    return unpacked


def waiting_on(kept: str | None) -> str | None:
    """The name of the bridge a run's kept state waits on (``None``: unnamed, none kept,
    or not a bridge's)."""
    try:
        name = None if kept is None else _unpacked("", kept).get("bridge")
    except BadInput:
        return None
    return name if isinstance(name, str) else None


def decided(reviews: Iterable[Review]) -> dict[str, Review]:
    """The decided reviews by call id."""
    return {review.call_id: review for review in reviews if not review.pending}
