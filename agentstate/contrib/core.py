"""What every framework adapter shares: the lifecycle of a run that stops for people.

An adapter (``openai_agents.ApprovalBridge``, ``langgraph.GraphBridge``,
``pydantic_ai.DeferredBridge``) subclasses ``Bridge`` and implements only what
its framework needs, as hooks the lifecycle calls: how to run it (``_run``),
where a run stopped (``_stop``), how to keep a stop and restore it (``_keep``,
``_restore``) and how to turn the reviewers' decisions into its resume input
(``_answer``). The core does the rest, the same way for all of them:

- start: the framework runs, and each step's token usage is added to the
  agentstate run (``add_usage``);
- stop for people: a stopped run files one approval request per gated call
  (``file``), or one pause per question (``ask``), decided in the admin or
  over REST; a stop whose calls were all decided at filing goes on at once;
- its framework state is kept in a context variable (``wait``), as the text of
  ``{"bridge": name, "state": state}``;
- resume exactly once: the state is taken back by a ``pop`` (``aresume``), so
  of any number of processes resuming one run at once exactly one does and the
  others are told ``busy``; a resume that fails puts the state back as it was;
- use once: before the framework runs an approved call, its approval is used
  (``consume``) for exactly the arguments it runs with, the reviewer's edit if
  any; an approval used already is not run again;
- settle: the decisions become the framework's answers, worded the same way
  for every framework (``Review.refusal``, ``Review.not_run``, ``Review.ran``);
- a bridge registered under a name (``agentstate.contrib.register``) is
  resumed by the Celery task ``agentstate.tasks.resume_run`` once the last
  pending request of its waiting run is decided.

Where the state and the requests live is the bridge's ``store``:
``ServiceStore`` (the default, inside the Django site; in
``agentstate.contrib.service_store``) or ``RemoteStore`` (over REST, through
``agentstate-client``). This module imports no model, so that a process outside
the site can use ``RemoteStore`` without Django's settings. See docs/bridges.md.
"""

from __future__ import annotations

import abc
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import (
    TYPE_CHECKING,
    Any,
    ParamSpec,
    TypeAlias,
    TypeVar,
    Unpack,
)

from asgiref.sync import async_to_sync, sync_to_async
from django.core.exceptions import ImproperlyConfigured

from agentstate.contrib.kept import (
    EXPIRED,
    REJECTED,
    STATE_SCOPE,
    USED,
    Call,
    Question,
    Review,
    UsageDelta,
    unpacked,
    usage,
    waiting_on,
)
from agentstate.types import arguments_digest

__all__ = [
    "BUSY",
    "EXPIRED",
    "FINISHED",
    "REJECTED",
    "STATE_SCOPE",
    "WAITING",
    "Bridge",
    "Call",
    "Outcome",
    "Question",
    "RemoteStore",
    "Review",
    "ServiceStore",
    "Stop",
    "Store",
    "UsageDelta",
    "decided",
    "off_loop",
    "usage",
    "waiting_on",
]

if TYPE_CHECKING:
    from agentstate.contrib.service_store import ServiceStore as ServiceStore

FINISHED = "finished"
WAITING = "waiting"
BUSY = "busy"

# The name of the bridge the run being resumed waited on (set while ``taking`` goes on),
# which a bridge without a name of its own keeps for the run's next stop.
_resuming: ContextVar[str | None] = ContextVar("agentstate_resuming", default=None)

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class Stop:
    """Where a run stopped for people, as an adapter reads it (``Bridge._stop``) or
    restores it (``Bridge._restore``).

    ``state``: the adapter's own (what ``_keep`` keeps and ``_answer`` goes on from);
    ``calls``: the gated calls to file; ``questions``: the pauses it asked;
    ``answers``: the answers given so far, by interrupt id; ``result``: the waiting
    outcome's ``result``.
    """

    state: Any
    calls: list[Call] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)
    result: Any = None

    @property
    def unanswered(self) -> list[Question]:
        return [q for q in self.questions if q.interrupt_id not in self.answers]


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

    def consume(self, run_id: str, review: Review) -> bool:
        """Use the call's approval once (see ``ServiceStore.consume``); a client without
        ``consume_approval`` (before agentstate-client had it) cannot, and goes on."""
        from agentstate_client import AlreadyConsumed as RemoteAlreadyConsumed

        if not hasattr(self.client, "consume_approval"):
            return True
        try:
            self.client.consume_approval(
                run_id, review.tool_name, review.call_id, arguments_digest(review.arguments_to_run)
            )
        except RemoteAlreadyConsumed:
            return False
        return True

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

    def wait_decided(self, run_id: str, timeout: float) -> list[Review]:
        """Long-poll each pending request in turn (``wait_for_decision``) until none is
        pending or ``timeout`` seconds have passed; the run's reviews then."""
        deadline = time.monotonic() + timeout
        for review in self.reviews(run_id):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if review.pending:
                self.client.wait_for_decision(review.id, left)
        return self.reviews(run_id)

    def take_state(self, run_id: str) -> str | None:
        try:
            kept: str = self.client.pop(STATE_SCOPE, run_id)
        except self._absent:
            return None
        return kept

    def release_state(self, run_id: str) -> None:
        """Nothing to release: over REST the state is popped without a lease."""

    def put_back_state(self, run_id: str, kept: str) -> None:
        """A resume failed: the state back (the approvals it consumed stay used: the
        REST API gives none back)."""
        self.keep_state(run_id, kept)

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


Store: TypeAlias = "ServiceStore | RemoteStore"


def __getattr__(name: str) -> Any:
    if name == "ServiceStore":
        return _service_store()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _service_store() -> type[ServiceStore]:
    # Imported when asked for: ServiceStore needs the site's settings and models, which
    # a process using RemoteStore (and importing this module) does without.
    from agentstate.contrib.service_store import ServiceStore

    return ServiceStore


def off_loop(function: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``function`` (a store's, which talks to the database or the server) as a coroutine
    function that runs it off the event loop, in Django's thread for the database."""
    return sync_to_async(function)


class Bridge(abc.ABC):
    """The base of the framework adapters: the lifecycle of a bridged run (see the
    module's docs), the same for every framework.

    An adapter implements the hooks the lifecycle calls (see docs/bridges.md,
    "Writing an adapter"): ``_run`` (one run of the framework), ``_stop`` (where a
    run stopped for people, or ``None`` when it finished), ``_keep`` and
    ``_restore`` (a stop as JSON and back) and ``_answer`` (the decisions as the
    framework's resume input); ``_result`` when a finished outcome shows another
    result than the step's. ``name`` is set by ``agentstate.contrib.register``; a
    run waiting on a named bridge is resumed by a Celery worker once it is decided.
    """

    name: str | None = None

    def __init__(self, *, store: Store | None = None) -> None:
        self.store: Store = _service_store()() if store is None else store

    # The lifecycle: start, stop for people, settle, resume exactly once.

    async def _begin(self, run_id: str, input: Any) -> Outcome:
        """Start: run the framework on ``input`` (``_run``'s) in the run ``run_id``
        (created by the caller), until it finishes or waits."""
        return await self._settle(run_id, await self._step(run_id, input))

    async def _step(self, run_id: str, input: Any) -> Any:
        """One run of the framework (``_run``); what it used is added to the agentstate
        run, also when it fails (as far as ``_run`` counted it)."""
        used = usage()
        try:
            return await self._run(run_id, input, used)
        finally:
            await self.add_usage(run_id, used)

    async def _settle(self, run_id: str, step: Any) -> Outcome:
        """Where ``step`` left the run: ``finished``, or its calls filed and its questions
        asked and ``waiting`` on them; a stop whose calls were all decided at filing
        (by a policy or the run's records) and that asks nothing goes on at once."""
        while True:
            stop = await self._stop(run_id, step)
            if stop is None:
                return Outcome(run_id, FINISHED, result=self._result(step))
            reviews = await self.file(run_id, stop.calls)
            pending = [review for review in reviews if review.pending]
            unanswered = stop.unanswered
            if pending or unanswered:
                await self.wait(run_id, self._keep(stop))
                return Outcome(
                    run_id, WAITING, result=stop.result, pending=pending, questions=unanswered
                )
            reviews = await self.consume(run_id, reviews)
            step = await self._step(run_id, await self._answer(run_id, stop, reviews))

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
        return await self.taking(run_id, lambda saved: self._decided(run_id, saved))

    async def _decided(self, run_id: str, saved: Any) -> Outcome:
        """Go on from ``saved``, just taken, with the reviews read now: the reviews read
        before the take may be of an earlier stop, which another process resumed (and
        stopped again) in between. Kept again and ``waiting`` while one is pending."""
        reviews = await off_loop(self.store.reviews)(run_id)
        pending = [r for r in reviews if r.pending]
        if pending:
            await self.wait(run_id, saved)
            return Outcome(run_id, WAITING, pending=pending)
        return await self._continue(run_id, saved, reviews)

    async def taking(self, run_id: str, go_on: Callable[[Any], Awaitable[Outcome]]) -> Outcome:
        """Take the run's kept state (exactly once across processes) and go on with it;
        ``busy`` when there is none. If going on fails, the state is put back as it
        was (with the approvals the attempt consumed, in the site), so that the run
        can be resumed again; if the process dies, the store's lease on it runs out
        and a beat task puts it back."""
        kept = await off_loop(self.store.take_state)(run_id)
        if kept is None:
            return Outcome(run_id, BUSY)
        resuming = None
        try:
            taken = unpacked(run_id, kept)
            resuming = _resuming.set(taken.get("bridge"))
            outcome = await go_on(taken["state"])
        except BaseException:
            await off_loop(self.store.put_back_state)(run_id, kept)
            raise
        finally:
            if resuming is not None:
                _resuming.reset(resuming)
        await off_loop(self.store.release_state)(run_id)
        return outcome

    async def _continue(self, run_id: str, saved: Any, reviews: list[Review]) -> Outcome:
        """Go on from the stop ``saved`` (what ``wait`` kept, now taken) with the run's
        ``reviews``, none of them pending: kept again and ``waiting`` while a question
        is unanswered; else the framework resumes, the stop's questions are resolved,
        and the run settles."""
        stop = await self._restore(run_id, saved)
        unanswered = stop.unanswered
        if unanswered:
            await self.wait(run_id, saved)
            return Outcome(run_id, WAITING, questions=unanswered)
        reviews = await self.consume(run_id, reviews)
        step = await self._step(run_id, await self._answer(run_id, stop, reviews))
        for question in stop.questions:
            await off_loop(self.store.resolve)(run_id, question.interrupt_id)
        return await self._settle(run_id, step)

    # The hooks: what differs from one framework to the next.

    @abc.abstractmethod
    async def _run(self, run_id: str, input: Any, used: UsageDelta) -> Any:
        """Run the framework on ``input`` (the adapter's start input, or what ``_answer``
        made) until it finishes or stops; the step, as ``_stop`` reads it. Count what the
        run used into ``used`` (the counters this step adds to the run)."""

    @abc.abstractmethod
    async def _stop(self, run_id: str, step: Any) -> Stop | None:
        """Where ``step`` stopped for people (its gated calls, the questions it asked
        with ``ask``), or ``None`` when the run finished."""

    @abc.abstractmethod
    def _keep(self, stop: Stop) -> Any:
        """What to keep of a stop that waits (JSON), for ``_restore``."""

    @abc.abstractmethod
    async def _restore(self, run_id: str, saved: Any) -> Stop:
        """The stop ``_keep`` kept (``BadInput`` when ``saved`` is not this adapter's)."""

    @abc.abstractmethod
    async def _answer(self, run_id: str, stop: Stop, reviews: list[Review]) -> Any:
        """The input ``_run`` resumes the framework with: the decisions of the stop's
        calls (``reviews``, none pending) and its answers, in the framework's terms."""

    def _result(self, step: Any) -> Any:
        """The finished outcome's ``result``: the step itself unless an adapter says."""
        return step

    # The steps of the lifecycle, which an adapter may also call or extend.

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

    async def consume(self, run_id: str, reviews: list[Review]) -> list[Review]:
        """Use each approved call's approval once, for exactly the arguments it will run
        with (``Review.arguments_to_run``), before the framework runs it; a call whose
        approval was used already (a replay) is answered as not approved instead."""
        use = off_loop(self.store.consume)
        answered = []
        for review in reviews:
            if review.approved and not await use(run_id, review):
                review = replace(review, status="rejected", reason=USED, approved_arguments=None)
            answered.append(review)
        return answered

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

    async def await_decided(self, run_id: str, timeout: float) -> list[Review]:
        """The run's reviews once none of them is pending (decided or expired), or as
        they stand after ``timeout`` seconds: a run's wait for its reviewers, told at
        once of each decision rather than polling."""
        return await off_loop(self.store.wait_decided)(run_id, timeout)

    def wait_decided(self, run_id: str, timeout: float) -> list[Review]:
        """``await_decided`` for sync code."""
        return async_to_sync(self.await_decided)(run_id, timeout)

    async def peek(self, run_id: str) -> Any:
        """The framework state a waiting run keeps, without taking it (``None``: none)."""
        kept = await off_loop(self.store.peek_state)(run_id)
        return None if kept is None else unpacked(run_id, kept)["state"]

    async def add_usage(self, run_id: str, delta: UsageDelta) -> None:
        """Add a step's usage to the run (nothing when every counter is 0)."""
        if any(delta.values()):
            await off_loop(self.store.add_usage)(run_id, **delta)


def decided(reviews: Iterable[Review]) -> dict[str, Review]:
    """The decided reviews by call id."""
    return {review.call_id: review for review in reviews if not review.pending}
