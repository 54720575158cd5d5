"""The Pydantic AI bridge end to end: Pydantic AI's real agent loop, a scripted model.

A tool needing approval ends the agent's run with ``DeferredToolRequests``; the
bridge keeps the message history and files one request per call; a reviewer
decides through the service layer in another thread; a bridge built afresh
(as another process would) resumes the run from the kept history.
"""

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from pydantic_ai import (
    Agent,
    ApprovalRequired,
    CallDeferred,
    DeferredToolRequests,
    ModelRequest,
    ModelResponse,
    RunContext,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from agentstate import contrib
from agentstate.contrib.core import Review, ServiceStore, waiting_on
from agentstate.contrib.pydantic_ai import (
    BUSY,
    FINISHED,
    WAITING,
    DeferredBridge,
    UnsupportedDeferral,
    _decision,
)
from agentstate.exceptions import BadInput, RunExists
from agentstate.models import ApprovalRequest, Run
from agentstate.services import approvals, context
from tests.bridging import review_in_thread

pytestmark = pytest.mark.django_db(transaction=True)


def step_usage() -> RequestUsage:
    return RequestUsage(
        input_tokens=10, output_tokens=4, cache_read_tokens=3, output_reasoning_tokens=1
    )


def usage_of(steps: int) -> dict:
    """What ``steps`` model responses of ``step_usage`` add up to on the agentstate run."""
    return {
        "requests": steps,
        "input_tokens": 10 * steps,
        "output_tokens": 4 * steps,
        "total_tokens": 14 * steps,
        "cached_tokens": 3 * steps,
        "reasoning_tokens": steps,
    }


class Mailer:
    """An agent with one approval-gated tool that records every real execution; its
    model answers each request with the next scripted response and keeps what it was sent."""

    def __init__(self, *steps: list, deps=None) -> None:
        self.sent: list[str] = []
        # called by a send before it is recorded (a test holding a run meanwhile)
        self.sending: Callable[[], object] = lambda: None
        self.steps = list(steps)
        self.received: list[list[ModelMessage]] = []

        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.received.append(messages)
            return ModelResponse(parts=self.steps.pop(0), usage=step_usage())

        self.agent = Agent(FunctionModel(respond), output_type=[str, DeferredToolRequests])

        @self.agent.tool_plain(requires_approval=True)
        def send_email(to: str) -> str:
            """Send an email."""
            self.sending()
            self.sent.append(to)
            return f"sent to {to}"

        @self.agent.tool
        def archive(ctx: RunContext, folder: str) -> str:
            """Archive a folder: needs approval unless the approval is in hand."""
            if not ctx.tool_call_approved:
                raise ApprovalRequired()
            self.sent.append(f"archive {folder} for {ctx.deps}")
            return "archived"

        @self.agent.tool_plain
        def ship(parcel: str) -> str:
            """A call that runs outside the agent."""
            raise CallDeferred()

    def bridge(self, user=None, **options) -> DeferredBridge:
        return DeferredBridge(self.agent, store=ServiceStore(user), **options)

    def returned(self) -> list:
        """The tool returns the model was sent in its last request."""
        last = self.received[-1][-1]
        assert isinstance(last, ModelRequest)
        return [part for part in last.parts if isinstance(part, ToolReturnPart)]


def email(to: str, call_id: str) -> list:
    return [ToolCallPart("send_email", {"to": to}, tool_call_id=call_id)]


def done(text: str = "done") -> list:
    return [TextPart(text)]


@pytest.fixture
def reviewer(make_user):
    return make_user("reviewer", "agentstate.decide_approvalrequest")


def test_approved_call_runs_once_after_the_reviewer_decides(reviewer):
    first = Mailer(email("bob", "call-1"))
    outcome = first.bridge().start("mail bob", run_id="run-approve")
    assert outcome.status == WAITING and first.sent == []
    assert isinstance(outcome.result.output, DeferredToolRequests)
    [request] = outcome.pending
    assert (request.tool_name, request.call_id, request.arguments) == (
        "send_email",
        "call-1",
        {"to": "bob"},
    )
    assert Run.objects.get(run_id="run-approve").usage == usage_of(1)

    later = Mailer(done("mailed"))  # another process: same agent, fresh objects
    outcome = later.bridge().resume("run-approve")
    assert outcome.status == WAITING and [r.id for r in outcome.pending] == [request.id]
    assert later.received == [] and later.sent == []

    review_in_thread(request.id, "approve", reviewer)
    outcome = later.bridge().resume("run-approve")
    assert outcome.status == FINISHED and outcome.final_output == "mailed"
    assert first.sent + later.sent == ["bob"]
    assert [(p.tool_call_id, p.content) for p in later.returned()] == [("call-1", "sent to bob")]
    assert Run.objects.get(run_id="run-approve").usage == usage_of(2)

    assert later.bridge().resume("run-approve").status == BUSY
    assert first.sent + later.sent == ["bob"]
    assert Run.objects.get(run_id="run-approve").usage == usage_of(2)


def test_a_resume_that_fails_gives_back_the_approvals_it_used(reviewer):
    """docs/bridges.md: a resume that fails puts the run back as it was. Its ``deps``
    failing after the approval was used, before the tool ran: the retry runs the call,
    once, as it would after a killed resume."""
    first = Mailer(email("bob", "call-1"))
    outcome = first.bridge().start("mail bob", run_id="run-fails")
    review_in_thread(outcome.pending[0].id, "approve", reviewer)
    failures = [ConnectionError("the directory is unreachable")]

    def deps(run_id, context):
        if failures:
            raise failures.pop()
        return None

    later = Mailer(done("mailed bob"))
    with pytest.raises(ConnectionError):
        later.bridge(deps=deps).resume("run-fails")
    assert later.sent == [] and ApprovalRequest.objects.get().consumed_at is None
    outcome = later.bridge(deps=deps).resume("run-fails")
    assert outcome.status == FINISHED and outcome.final_output == "mailed bob"
    assert first.sent + later.sent == ["bob"]
    assert [p.content for p in later.returned()] == ["sent to bob"]
    assert ApprovalRequest.objects.get().consumed_at is not None


def test_an_edited_approval_runs_the_tool_with_the_reviewers_arguments(reviewer):
    first = Mailer(email("bob", "call-1"))
    outcome = first.bridge().start("mail bob", run_id="run-edit")
    review_in_thread(outcome.pending[0].id, "approve", reviewer, arguments={"to": "carol"})
    later = Mailer(done("mailed carol"))
    outcome = later.bridge().resume("run-edit")
    assert outcome.status == FINISHED and outcome.final_output == "mailed carol"
    assert first.sent + later.sent == ["carol"]
    assert [p.content for p in later.returned()] == ["sent to carol"]


def test_a_rejected_call_never_runs_and_the_model_hears_why(reviewer):
    first = Mailer(email("eve", "call-1"))
    outcome = first.bridge().start("mail eve")
    review_in_thread(outcome.pending[0].id, "reject", reviewer, reason="not eve")
    later = Mailer(done("did not mail"))
    outcome = later.bridge().resume(outcome.run_id)
    assert outcome.status == FINISHED and outcome.final_output == "did not mail"
    assert first.sent == later.sent == []
    [denied] = later.returned()
    assert (denied.tool_call_id, denied.content) == ("call-1", "not eve")
    assert Run.objects.get(run_id=outcome.run_id).usage == usage_of(2)


def test_each_decision_maps_to_pydantic_ais_result():
    def review(status: str, **fields) -> Review:
        return Review(1, "send_email", "call-1", {"to": "bob"}, status, **fields)

    assert _decision(review("approved")).override_args is None
    assert _decision(review("approved", approved_arguments={"to": "x"})).override_args == {
        "to": "x"
    }
    assert _decision(review("rejected", reason="no")).message == "no"
    assert _decision(review("rejected")).message == "A reviewer rejected this call."
    assert "expired" in _decision(review("expired")).message
    assert "not a JSON object" in _decision(review("approved", approved_arguments=[1])).message


def test_a_run_that_stops_again_files_the_new_calls_and_waits_again(reviewer):
    first = Mailer(email("bob", "call-1"))
    outcome = first.bridge().start("mail bob, then eve", run_id="run-twice")
    review_in_thread(outcome.pending[0].id, "approve", reviewer)
    second = Mailer(email("eve", "call-2"))
    outcome = second.bridge().resume("run-twice")
    assert outcome.status == WAITING and second.sent == ["bob"]
    assert [(r.call_id, r.arguments) for r in outcome.pending] == [("call-2", {"to": "eve"})]
    review_in_thread(outcome.pending[0].id, "approve", reviewer)
    third = Mailer(done())
    assert third.bridge().resume("run-twice").status == FINISHED
    assert first.sent + second.sent + third.sent == ["bob", "eve"]
    assert [p.tool_call_id for p in third.returned()] == ["call-2"]
    assert Run.objects.get(run_id="run-twice").usage == usage_of(3)


def test_an_always_approval_lets_the_next_call_run_without_a_reviewer(reviewer):
    first = Mailer(email("bob", "call-1"))
    outcome = first.bridge().start("mail bob and carol", run_id="run-always")
    review_in_thread(outcome.pending[0].id, "approve", reviewer, always=True)
    later = Mailer(email("carol", "call-2"), done())
    outcome = later.bridge().resume("run-always")
    assert outcome.status == FINISHED
    assert later.sent == ["bob", "carol"]
    filed = ApprovalRequest.objects.filter(run__run_id="run-always").order_by("pk")
    assert [(r.call_id, r.decided_by_id) for r in filed] == [
        ("call-1", reviewer.pk),
        ("call-2", None),
    ]
    assert filed[1].status == "approved"
    assert Run.objects.get(run_id="run-always").usage == usage_of(3)


def test_a_policy_lets_a_matching_call_run_without_a_reviewer(make_user):
    agent = make_user("agent")
    approvals.create_policy("send_email", "approve", user=agent, arguments={"to": "bob"})
    mailer = Mailer(email("bob", "call-1"), email("eve", "call-2"))
    outcome = mailer.bridge(agent).start("mail bob then eve", run_id="run-policy")
    assert outcome.status == WAITING and mailer.sent == ["bob"]
    assert [(r.call_id, r.arguments) for r in outcome.pending] == [("call-2", {"to": "eve"})]
    filed = ApprovalRequest.objects.get(run__run_id="run-policy", call_id="call-1")
    assert filed.policy_id is not None and filed.decided_by is None
    assert Run.objects.get(run_id="run-policy").usage == usage_of(2)


@pytest.mark.parametrize("then, wins", [(done(), FINISHED), (email("eve", "call-2"), WAITING)])
def test_concurrent_resumes_take_the_run_once(reviewer, concurrently, then, wins):
    first = Mailer(email("bob", "call-1"))
    outcome = first.bridge().start("mail bob", run_id="run-race")
    review_in_thread(outcome.pending[0].id, "approve", reviewer)
    racers = [Mailer(list(then)) for _ in range(2)]
    answered = [threading.Event() for _ in racers]
    for i, racer in enumerate(racers):
        # The one that takes the run holds it until the other has answered: the two
        # resumes overlap, however the threads are scheduled.
        racer.sending = lambda i=i: answered[1 - i].wait(30)

    def resume(i: int) -> str:
        try:
            return racers[i].bridge().resume("run-race").status
        finally:
            answered[i].set()

    results = concurrently(2, resume)
    assert sorted(results) == sorted([BUSY, wins])
    assert sum(len(r.sent) for r in racers) == 1
    assert Run.objects.get(run_id="run-race").usage == usage_of(2)
    requests = ApprovalRequest.objects.filter(run__run_id="run-race")
    assert requests.count() == (2 if wins == WAITING else 1)


def test_approval_required_deps_and_context(reviewer):
    """A tool raising ``ApprovalRequired`` is filed too; ``deps`` is built from the
    run's context in the process that runs each step."""
    first = Mailer([ToolCallPart("archive", {"folder": "old"}, tool_call_id="call-1")])
    built: list = []

    def deps(run_id, run_context):
        built.append((run_id, run_context))
        return run_context["owner"]

    outcome = first.bridge(deps=deps).start("archive", run_id="run-deps", context={"owner": "ann"})
    [request] = outcome.pending
    assert (request.tool_name, request.arguments) == ("archive", {"folder": "old"})
    review_in_thread(request.id, "approve", reviewer)
    later = Mailer(done())
    assert later.bridge(deps=deps).resume("run-deps").status == FINISHED
    assert later.sent == ["archive old for ann"]
    assert built == [("run-deps", {"owner": "ann"})] * 2


def test_calls_to_run_outside_the_agent_are_refused():
    mailer = Mailer([ToolCallPart("ship", {"parcel": "p"}, tool_call_id="call-1")])
    with pytest.raises(UnsupportedDeferral, match="ship"):
        mailer.bridge().start("ship it", run_id="run-external")
    assert not ApprovalRequest.objects.filter(run__run_id="run-external").exists()
    assert Run.objects.get(run_id="run-external").usage == usage_of(1)


def test_a_taken_run_id_and_a_foreign_state_are_refused(reviewer):
    Mailer(email("bob", "call-1")).bridge().start("mail bob", run_id="run-taken")
    with pytest.raises(RunExists):
        Mailer(done()).bridge().start("again", run_id="run-taken")

    outcome = Mailer(email("bob", "call-1")).bridge().start("mail bob", run_id="run-foreign")
    review_in_thread(outcome.pending[0].id, "approve", reviewer)
    context.put("agentstate.bridges", "run-foreign", '{"bridge": null, "state": "other"}')
    later = Mailer(done())
    with pytest.raises(BadInput, match="not a Pydantic AI bridge's"):
        later.bridge().resume("run-foreign")
    assert later.received == []
    # the state is put back as it was, for the bridge it belongs to
    assert context.get_state("agentstate.bridges", "run-foreign") is not None


def test_a_registered_bridge_resumes_when_the_last_request_is_decided(reviewer, eager_celery):
    """Deciding the last pending request queues ``resume_run`` (run eagerly here), which
    resumes the run with the bridge registered under the name its state was kept with."""
    mailer = Mailer(email("bob", "call-1"), done("mailed"))
    bridge = contrib.register("pa-mailer", mailer.bridge())
    try:
        outcome = bridge.start("mail bob", run_id="run-auto")
        assert waiting_on(ServiceStore().peek_state("run-auto")) == "pa-mailer"
        approvals.decide(outcome.pending[0].id, "approve", by=reviewer)
    finally:
        contrib.unregister("pa-mailer")
    assert mailer.sent == ["bob"]
    assert ServiceStore().peek_state("run-auto") is None
    assert Run.objects.get(run_id="run-auto").usage == usage_of(2)


def test_the_guides_example_runs_as_it_is(capsys):
    """The example of docs/pydantic-ai.md, run as a reader pastes it into
    ``manage.py shell``: it prints what its comments say."""
    guide = (Path(__file__).resolve().parents[2] / "docs/pydantic-ai.md").read_text()
    example = guide.split("This example runs as it is", 1)[1].split("```python\n", 1)[1]
    example = example.split("```", 1)[0]
    exec(compile(example, "docs/pydantic-ai.md", "exec"), {"__name__": "__main__"})
    said = [line.split("# ", 1)[1] for line in example.splitlines() if "print(" in line]
    assert capsys.readouterr().out.splitlines() == said


def on_a_loop(coroutine):
    """Run ``coroutine`` as an async caller would, on an event loop of its own; then close
    the connection of the thread the database calls ran in (asgiref's, outside any
    ``async_to_sync``)."""

    async def run_and_close():
        try:
            return await coroutine
        finally:
            await sync_to_async(connections.close_all)()

    return asyncio.run(run_and_close())


def test_the_async_forms_and_deps_that_query_the_database(reviewer):
    """``astart`` and ``aresume`` on an event loop; ``deps`` runs off it, so the ORM works."""
    from django.contrib.auth import get_user_model

    def deps(run_id, run_context):
        return get_user_model().objects.get(pk=run_context["user"]).username

    first = Mailer([ToolCallPart("archive", {"folder": "old"}, tool_call_id="call-1")])
    outcome = on_a_loop(
        first.bridge(deps=deps).astart("archive", run_id="run-async", context={"user": reviewer.pk})
    )
    assert outcome.status == WAITING
    review_in_thread(outcome.pending[0].id, "approve", reviewer)
    later = Mailer(done("archived"))
    outcome = on_a_loop(later.bridge(deps=deps).aresume("run-async"))
    assert outcome.status == FINISHED and outcome.final_output == "archived"
    assert later.sent == ["archive old for reviewer"]
