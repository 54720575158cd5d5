"""The OpenAI Agents SDK bridge end to end: the SDK's real Runner, a scripted model.

A tool needing approval stops the run and files a request; a reviewer
decides it through the service layer in another thread; a bridge built
afresh (as another process would) resumes the run from the stored state.
"""

import threading
import time

import pytest
from agents import Agent, ModelResponse, RunConfig, Usage, function_tool
from agents.models.interface import Model
from agents.testing import assistant_message, function_call

from agentstate import contrib
from agentstate.contrib.core import STATE_SCOPE, waiting_on
from agentstate.contrib.openai_agents import BUSY, FINISHED, WAITING, ApprovalBridge, ServiceStore
from agentstate.exceptions import BadInput
from agentstate.models import ApprovalRequest, Run
from agentstate.services import approvals, context
from tests.bridging import review_in_thread

pytestmark = pytest.mark.django_db(transaction=True)

STEP_USAGE = {"requests": 1, "input_tokens": 10, "output_tokens": 4, "total_tokens": 14}


class ScriptedModel(Model):
    """Answers each model call with the next scripted output; records what it was sent."""

    def __init__(self, steps: list[list]) -> None:
        self.steps = list(steps)
        self.inputs: list = []

    async def get_response(
        self,
        system_instructions,
        input,
        model_settings,
        tools,
        output_schema,
        handoffs,
        tracing,
        *,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
        **kwargs,
    ) -> ModelResponse:
        self.inputs.append(input)
        return ModelResponse(output=self.steps.pop(0), usage=Usage(**STEP_USAGE), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the bridge does not stream")


class Mailer:
    """An agent with one approval-gated tool that records every real execution."""

    def __init__(self, *steps: list) -> None:
        self.sent: list[str] = []
        self.model = ScriptedModel(list(steps))

        @function_tool(needs_approval=True)
        def send_email(to: str) -> str:
            """Send an email."""
            self.sent.append(to)
            return f"sent to {to}"

        self.agent = Agent(name="mailer", model=self.model, tools=[send_email])

    def bridge(self, user=None) -> ApprovalBridge:
        return ApprovalBridge(
            self.agent, store=ServiceStore(user), run_config=RunConfig(tracing_disabled=True)
        )


def email(to: str, call_id: str) -> list:
    return [function_call("send_email", {"to": to}, call_id=call_id)]


def done(text: str = "done") -> list:
    return [assistant_message(text)]


@pytest.fixture
def reviewer(make_user):
    return make_user("reviewer", "agentstate.decide_approvalrequest")


def test_approved_call_runs_once_after_the_reviewer_decides(reviewer):
    first = Mailer(email("bob", "call-1"))
    outcome = first.bridge().start("mail bob", run_id="run-approve")
    assert outcome.status == WAITING and first.sent == []
    [request] = outcome.pending
    assert (request.tool_name, request.call_id, request.arguments) == (
        "send_email",
        "call-1",
        {"to": "bob"},
    )
    later = Mailer(done("mailed"))  # another process: same agent, fresh objects
    assert later.bridge().resume("run-approve").status == WAITING

    review_in_thread(request.id, "approve", reviewer)
    outcome = later.bridge().resume("run-approve")
    assert outcome.status == FINISHED and outcome.final_output == "mailed"
    assert first.sent + later.sent == ["bob"]
    run = Run.objects.get(run_id="run-approve")
    assert run.usage == {
        "requests": 2,
        "input_tokens": 20,
        "output_tokens": 8,
        "total_tokens": 28,
        "cached_tokens": 0,
        "reasoning_tokens": 0,
    }
    assert later.bridge().resume("run-approve").status == BUSY
    assert first.sent + later.sent == ["bob"]


def test_a_run_waits_for_its_reviewers_and_is_told_of_the_decision(reviewer):
    first = Mailer(email("bob", "call-1"))
    outcome = first.bridge().start("mail bob", run_id="run-wait")
    bridge = Mailer(done("mailed")).bridge()
    # nobody decides: the wait ends at its timeout with the request still pending
    assert [review.pending for review in bridge.wait_decided("run-wait", 0.3)] == [True]

    decided = threading.Timer(0.5, review_in_thread, (outcome.pending[0].id, "approve", reviewer))
    decided.start()
    started = time.monotonic()
    reviews = bridge.wait_decided("run-wait", 30)
    decided.join()
    assert [review.status for review in reviews] == ["approved"]
    assert time.monotonic() - started < 30  # woken by the decision, not the timeout
    assert bridge.resume("run-wait").status == FINISHED


def test_rejected_call_never_runs_and_the_model_hears_why(reviewer):
    first = Mailer(email("eve", "call-1"))
    outcome = first.bridge().start("mail eve")
    review_in_thread(outcome.pending[0].id, "reject", reviewer, reason="not eve")
    later = Mailer(done("did not mail"))
    outcome = later.bridge().resume(outcome.run_id)
    assert outcome.status == FINISHED and outcome.final_output == "did not mail"
    assert first.sent == later.sent == []
    sent_back = [
        item for item in later.model.inputs[-1] if item.get("type") == "function_call_output"
    ]
    assert [item["output"] for item in sent_back] == ["not eve"]
    assert Run.objects.get(run_id=outcome.run_id).usage["requests"] == 2


def test_always_approval_lets_the_next_call_run_without_a_request(reviewer):
    first = Mailer(email("bob", "call-1"))
    outcome = first.bridge().start("mail bob and carol", run_id="run-always")
    review_in_thread(outcome.pending[0].id, "approve", reviewer, always=True)
    later = Mailer(email("carol", "call-2"), done())
    outcome = later.bridge().resume("run-always")
    assert outcome.status == FINISHED
    assert later.sent == ["bob", "carol"]
    assert ApprovalRequest.objects.filter(run__run_id="run-always").count() == 1
    assert Run.objects.get(run_id="run-always").usage["requests"] == 3


def test_concurrent_resumes_run_the_tool_once(reviewer, concurrently):
    first = Mailer(email("bob", "call-1"))
    outcome = first.bridge().start("mail bob", run_id="run-race")
    review_in_thread(outcome.pending[0].id, "approve", reviewer)
    racers = [Mailer(done()) for _ in range(4)]
    results = concurrently(4, lambda i: racers[i].bridge().resume("run-race").status)
    assert sorted(results) == [BUSY, BUSY, BUSY, FINISHED]
    assert sum(len(r.sent) for r in racers) == 1
    assert Run.objects.get(run_id="run-race").usage["requests"] == 2


def test_an_edited_approval_runs_the_reviewers_call_not_the_models(reviewer):
    """The SDK runs a call only with the model's arguments; the bridge runs the edited
    call of the function tool once and answers the model's call with its result."""
    first = Mailer(email("bob", "call-1"))
    outcome = first.bridge().start("mail bob", run_id="run-edit")
    review_in_thread(outcome.pending[0].id, "approve", reviewer, arguments={"to": "carol"})
    [review] = ServiceStore().reviews("run-edit")
    assert review.edited and review.approved_arguments == {"to": "carol"}
    assert review.arguments == {"to": "bob"} and review.arguments_to_run == {"to": "carol"}
    later = Mailer(done("mailed carol"))
    outcome = later.bridge().resume("run-edit")
    assert outcome.status == FINISHED and outcome.final_output == "mailed carol"
    assert first.sent + later.sent == ["carol"]
    sent_back = [
        item for item in later.model.inputs[-1] if item.get("type") == "function_call_output"
    ]
    assert len(sent_back) == 1 and "sent to carol" in sent_back[0]["output"]
    assert '{"to": "carol"}' in sent_back[0]["output"]


@pytest.mark.parametrize("edited", [["carol"], "carol"])
def test_an_edit_that_is_no_json_object_runs_nothing_and_the_model_hears_why(reviewer, edited):
    """A tool's arguments are a JSON object: approved only with anything else, the call
    does not run, in the words every bridge uses."""
    first = Mailer(email("bob", "call-1"))
    outcome = first.bridge().start("mail bob", run_id="run-edit-list")
    review_in_thread(outcome.pending[0].id, "approve", reviewer, arguments=edited)
    later = Mailer(done("did not mail"))
    outcome = later.bridge().resume("run-edit-list")
    assert outcome.status == FINISHED and first.sent + later.sent == []
    sent_back = [
        item for item in later.model.inputs[-1] if item.get("type") == "function_call_output"
    ]
    assert len(sent_back) == 1
    assert sent_back[0]["output"].endswith(
        "which are not a JSON object, as a tool's arguments must be: it did not run."
    )


def test_a_policy_lets_a_matching_call_run_without_a_reviewer(make_user):
    """A call that a policy decides is filed approved, and the run goes on at once."""
    agent = make_user("agent")
    approvals.create_policy("send_email", "approve", user=agent, arguments={"to": "bob"})
    mailer = Mailer(email("bob", "call-1"), email("eve", "call-2"))
    outcome = mailer.bridge(agent).start("mail bob then eve", run_id="run-policy")
    assert outcome.status == WAITING and mailer.sent == ["bob"]
    assert [(r.call_id, r.arguments) for r in outcome.pending] == [("call-2", {"to": "eve"})]
    filed = ApprovalRequest.objects.get(run__run_id="run-policy", call_id="call-1")
    assert filed.policy_id is not None and filed.decided_by is None


def test_a_run_resumed_by_an_unnamed_bridge_still_waits_on_the_named_one(reviewer):
    """A registered bridge stops a run; a bridge with no name (another process's, say)
    resumes it and it stops again: it still waits on the registered name, so it
    resumes by itself once decided."""
    named = Mailer(email("bob", "call-1"))
    contrib.register("mailer-test", named.bridge())
    try:
        outcome = contrib.registered("mailer-test").start("mail bob and carol", run_id="run-2x")
        assert waiting_on(ServiceStore().peek_state("run-2x")) == "mailer-test"
        review_in_thread(outcome.pending[0].id, "approve", reviewer)
        unnamed = Mailer(email("carol", "call-2"))
        assert unnamed.bridge().resume("run-2x").status == WAITING
        assert waiting_on(ServiceStore().peek_state("run-2x")) == "mailer-test"
    finally:
        contrib.unregister("mailer-test")


def test_a_variable_that_holds_no_bridges_state_is_refused_and_kept():
    """Whatever else sits in a run's variable of the bridges' scope is refused with a
    clear message and left as it was, never taken and lost."""
    context.put(STATE_SCOPE, "run-foreign", "not a bridge's state")
    with pytest.raises(BadInput, match="holds no bridge's state"):
        Mailer(done()).bridge().resume("run-foreign")
    assert context.get_state(STATE_SCOPE, "run-foreign") == "not a bridge's state"
    assert waiting_on(context.get_state(STATE_SCOPE, "run-foreign")) is None
