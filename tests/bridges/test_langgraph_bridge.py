"""GraphBridge end to end: real graphs on AgentStateSaver, a scripted chat model.

An ``interrupt()`` becomes a pause its owner answers exactly once; an interrupt
of LangChain's ``HumanInTheLoopMiddleware`` becomes approval requests that
reviewers decide through the service layer; a bridge built afresh (as another
process would, and in one test another process) resumes the thread.
"""

import json
import subprocess
import sys

import pytest
from django.db import connections
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate import contrib
from agentstate.contrib.core import BUSY, FINISHED, WAITING, ServiceStore
from agentstate.contrib.langgraph import AgentStateSaver, GraphBridge
from agentstate.exceptions import AlreadyClaimed, BadInput, Conflict, PauseNotFound
from agentstate.models import ApprovalRequest, PausedRun, Run
from agentstate.services import approvals
from tests.concurrency.test_pauses_processes import ROOT, site_env
from tests.langgraph_bridge_graphs import (
    Effects,
    Mailer,
    emails,
    question_graph,
    says,
    two_in_a_row,
)

pytestmark = pytest.mark.django_db(transaction=True)


def run_usage(requests: int) -> dict:
    """What ``requests`` scripted model calls add to a run."""
    return {
        "requests": requests,
        "input_tokens": 10 * requests,
        "output_tokens": 4 * requests,
        "total_tokens": 14 * requests,
        "cached_tokens": 0,
        "reasoning_tokens": 0,
    }


@pytest.fixture
def reviewer(make_user):
    return make_user("reviewer", "agentstate.decide_approvalrequest")


def decide(request_id: int, decision: str, user, **options) -> None:
    approvals.decide(ApprovalRequest.objects.get(pk=request_id), decision, by=user, **options)


# Questions


def test_a_question_waits_for_its_owner_and_the_answer_reaches_the_state():
    effects = Effects()
    outcome = GraphBridge(question_graph(effects)).start({"log": []}, owner="alice")
    assert outcome.status == WAITING and outcome.pending == []
    [question] = outcome.questions
    assert question.value == {"question": "colour for ask0?"}
    thread_id = outcome.thread_id
    pause = PausedRun.objects.get(chat_id=thread_id, tool_call_id=question.interrupt_id)
    assert (pause.owner, pause.payload, pause.status) == ("alice", question.value, "pending")
    assert Run.objects.filter(run_id=thread_id).exists()

    later = GraphBridge(question_graph(effects))  # another process: fresh objects
    outcome = later.answer(
        thread_id, question.interrupt_id, question.question_id, "blue", owner="alice"
    )
    assert outcome.status == FINISHED and outcome.thread_id == thread_id
    assert outcome.result == {"log": ["ask0:blue", "end"]}
    assert effects.done == ["ask0:blue"]
    pause.refresh_from_db()
    assert pause.status == "resolved"

    with pytest.raises(AlreadyClaimed):
        later.answer(thread_id, question.interrupt_id, question.question_id, "red", owner="alice")
    assert later.resume(thread_id).status == BUSY
    assert effects.done == ["ask0:blue"]


def test_a_stop_with_several_questions_resumes_once_all_are_answered():
    effects = Effects()
    bridge = GraphBridge(question_graph(effects, questions=2))
    outcome = bridge.start({"log": []}, thread_id="chat-2", owner="alice")
    assert outcome.status == WAITING and len(outcome.questions) == 2
    first, second = outcome.questions

    outcome = bridge.answer("chat-2", first.interrupt_id, first.question_id, "red", owner="alice")
    assert outcome.status == WAITING and outcome.questions == [second]
    assert effects.done == []
    assert bridge.resume("chat-2").questions == [second]

    outcome = bridge.answer("chat-2", second.interrupt_id, second.question_id, "tan", owner="alice")
    assert outcome.status == FINISHED
    node = {q.interrupt_id: q.value["question"][len("colour for ") : -1] for q in (first, second)}
    expected = sorted([f"{node[first.interrupt_id]}:red", f"{node[second.interrupt_id]}:tan"])
    assert sorted(effects.done) == expected
    assert sorted(outcome.result["log"][:2]) == expected and outcome.result["log"][2] == "end"
    statuses = PausedRun.objects.filter(chat_id="chat-2").values_list("status", flat=True)
    assert sorted(statuses) == ["resolved", "resolved"]


def test_an_answer_is_refused_before_anything_changes():
    bridge = GraphBridge(question_graph())
    outcome = bridge.start({"log": []}, thread_id="chat-bad", owner="alice")
    [question] = outcome.questions
    with pytest.raises(BadInput):
        bridge.answer(
            "chat-bad", question.interrupt_id, question.question_id, {1, 2}, owner="alice"
        )
    with pytest.raises(PauseNotFound):
        bridge.answer("chat-bad", question.interrupt_id, question.question_id, "x", owner="bob")
    assert PausedRun.objects.get(chat_id="chat-bad").status == "pending"
    with pytest.raises(Conflict):
        bridge.start({"log": []}, thread_id="chat-bad", owner="alice")
    outcome = bridge.answer(
        "chat-bad", question.interrupt_id, question.question_id, "x", owner="alice"
    )
    assert outcome.status == FINISHED
    # a finished thread goes on with new input, in the same agentstate run
    outcome = bridge.start({"log": ["again"]}, thread_id="chat-bad", owner="alice")
    assert outcome.status == WAITING and Run.objects.filter(run_id="chat-bad").count() == 1


def test_a_graph_must_keep_checkpoints():
    builder = question_graph()
    with pytest.raises(BadInput, match="checkpointer"):
        GraphBridge(builder.compile())
    with pytest.raises(BadInput, match="StateGraph"):
        GraphBridge(object())
    assert isinstance(GraphBridge(builder).graph.checkpointer, AgentStateSaver)
    saver = InMemorySaver()
    assert GraphBridge(builder.compile(checkpointer=saver)).graph.checkpointer is saver


def test_async_forms():
    from asgiref.sync import async_to_sync

    async def go():
        bridge = GraphBridge(question_graph())
        outcome = await bridge.astart({"log": []}, thread_id="chat-async", owner="alice")
        [q] = outcome.questions
        outcome = await bridge.aanswer(
            "chat-async", q.interrupt_id, q.question_id, 7, owner="alice"
        )
        return outcome, await bridge.aresume("chat-async")

    finished, busy = async_to_sync(go)()
    assert finished.result == {"log": ["ask0:7", "end"]} and busy.status == BUSY


# HumanInTheLoopMiddleware


def test_an_approved_call_runs_once_after_the_reviewer_decides(reviewer):
    first = Mailer(emails(("bob", "call-1")))
    outcome = GraphBridge(first.agent).start(
        {"messages": [{"role": "user", "content": "mail bob"}]}, thread_id="mail-1", owner="alice"
    )
    assert outcome.status == WAITING and outcome.questions == [] and first.sent == []
    [request] = outcome.pending
    assert (request.tool_name, request.call_id, request.arguments) == (
        "send_email",
        "call-1",
        {"to": "bob"},
    )
    assert not PausedRun.objects.filter(chat_id="mail-1").exists()
    later = Mailer(says("mailed"))
    assert GraphBridge(later.agent).resume("mail-1").status == WAITING

    decide(request.id, "approve", reviewer)
    outcome = GraphBridge(later.agent).resume("mail-1")
    assert outcome.status == FINISHED
    assert outcome.result["messages"][-1].content == "mailed"
    assert first.sent + later.sent == ["bob"]
    assert Run.objects.get(run_id="mail-1").usage == run_usage(2)
    assert GraphBridge(later.agent).resume("mail-1").status == BUSY


def test_an_edited_approval_runs_the_reviewers_arguments(reviewer):
    first = Mailer(emails(("bob", "call-1")))
    outcome = GraphBridge(first.agent).start({"messages": [("user", "mail bob")]}, owner="alice")
    decide(outcome.pending[0].id, "approve", reviewer, arguments={"to": "carol"})
    later = Mailer(says("mailed carol"))
    outcome = GraphBridge(later.agent).resume(outcome.thread_id)
    assert outcome.status == FINISHED
    assert first.sent + later.sent == ["carol"]
    [result] = [m for m in outcome.result["messages"] if isinstance(m, ToolMessage)]
    assert "sent to carol" in result.content and '{"to": "carol"}' in result.content


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_an_edit_the_tools_review_does_not_allow_runs_nothing(reviewer, mode):
    review = {"allowed_decisions": ["approve", "reject"]}
    first = Mailer(emails(("bob", "call-1")), mode=mode, review=review)
    outcome = GraphBridge(first.agent).start({"messages": [("user", "mail bob")]}, owner="alice")
    decide(outcome.pending[0].id, "approve", reviewer, arguments={"to": "carol"})
    later = Mailer(says("did not mail"), mode=mode, review=review)
    outcome = GraphBridge(later.agent).resume(outcome.thread_id)
    assert outcome.status == FINISHED and first.sent == later.sent == []
    [heard] = [m for m in later.model.sent[-1] if isinstance(m, ToolMessage)]
    assert '{"to": "carol"}' in heard.content and "did not run" in heard.content


def test_a_rejected_call_never_runs_and_the_model_hears_why(reviewer):
    first = Mailer(emails(("eve", "call-1")))
    outcome = GraphBridge(first.agent).start({"messages": [("user", "mail eve")]}, owner="alice")
    decide(outcome.pending[0].id, "reject", reviewer, reason="not eve")
    later = Mailer(says("did not mail"))
    outcome = GraphBridge(later.agent).resume(outcome.thread_id)
    assert outcome.status == FINISHED and first.sent == later.sent == []
    [heard] = [m for m in later.model.sent[-1] if isinstance(m, ToolMessage)]
    assert "not eve" in heard.content and heard.tool_call_id == "call-1"
    assert Run.objects.get(run_id=outcome.thread_id).usage == run_usage(2)


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_one_request_per_action_each_decision_its_own(reviewer, mode):
    first = Mailer(emails(("bob", "call-1"), ("eve", "call-2")), mode=mode)
    outcome = GraphBridge(first.agent).start(
        {"messages": [("user", "mail both")]}, thread_id=f"both-{mode}", owner="alice"
    )
    assert [(r.call_id, r.arguments) for r in outcome.pending] == [
        ("call-1", {"to": "bob"}),
        ("call-2", {"to": "eve"}),
    ]
    decide(outcome.pending[0].id, "approve", reviewer)
    later = Mailer(says("half done"), mode=mode)
    waiting = GraphBridge(later.agent).resume(f"both-{mode}")
    assert waiting.status == WAITING and [r.call_id for r in waiting.pending] == ["call-2"]
    decide(outcome.pending[1].id, "reject", reviewer)
    outcome = GraphBridge(later.agent).resume(f"both-{mode}")
    assert outcome.status == FINISHED and first.sent + later.sent == ["bob"]
    rejected = [
        m
        for m in outcome.result["messages"]
        if isinstance(m, ToolMessage) and m.tool_call_id == "call-2"
    ]
    assert len(rejected) == 1 and "not executed" in rejected[0].content


def test_a_call_decided_at_filing_goes_on_at_once(make_user):
    agent = make_user("agent")
    approvals.create_policy("send_email", "approve", user=agent, arguments={"to": "bob"})
    mailer = Mailer(emails(("bob", "call-1")), emails(("eve", "call-2")), says("done"))
    bridge = GraphBridge(mailer.agent, store=ServiceStore(agent))
    outcome = bridge.start({"messages": [("user", "mail bob, then eve")]}, owner="alice")
    assert outcome.status == WAITING and mailer.sent == ["bob"]
    assert [(r.call_id, r.arguments) for r in outcome.pending] == [("call-2", {"to": "eve"})]
    filed = ApprovalRequest.objects.get(run__run_id=outcome.thread_id, call_id="call-1")
    assert filed.policy_id is not None and filed.decided_by is None


def test_an_expired_request_is_a_rejection():
    first = Mailer(emails(("bob", "call-1")))
    outcome = GraphBridge(first.agent).start({"messages": [("user", "mail bob")]}, owner="alice")
    ApprovalRequest.objects.filter(pk=outcome.pending[0].id).update(status="expired")
    later = Mailer(says("too late"))
    outcome = GraphBridge(later.agent).resume(outcome.thread_id)
    assert outcome.status == FINISHED and first.sent == later.sent == []
    [heard] = [m for m in later.model.sent[-1] if isinstance(m, ToolMessage)]
    assert "expired" in heard.content


def test_a_registered_bridge_resumes_when_the_last_request_is_decided(reviewer, eager_celery):
    mailer = Mailer(emails(("bob", "call-1")), says("mailed"))
    bridge = contrib.register("mailer", GraphBridge(mailer.agent))
    try:
        outcome = bridge.start({"messages": [("user", "mail bob")]}, owner="alice")
        decide(outcome.pending[0].id, "approve", reviewer)
        assert mailer.sent == ["bob"]
        assert bridge.resume(outcome.thread_id).status == BUSY
    finally:
        contrib.unregister("mailer")


def test_a_thread_answered_through_an_unnamed_bridge_still_waits_on_its_registered_one():
    from agentstate.contrib.core import waiting_on

    named = contrib.register("asker", GraphBridge(two_in_a_row()))
    try:
        outcome = named.start({"log": []}, thread_id="chat-named", owner="alice")
        [first] = outcome.questions
        assert waiting_on(ServiceStore().peek_state("chat-named")) == "asker"
        plain = GraphBridge(two_in_a_row())  # another process, registering nothing
        assert plain.resume("chat-named").status == WAITING
        assert waiting_on(ServiceStore().peek_state("chat-named")) == "asker"
        outcome = plain.answer(
            "chat-named", first.interrupt_id, first.question_id, "a", owner="alice"
        )
        [second] = outcome.questions
        assert outcome.status == WAITING and second.value == "second?"
        assert waiting_on(ServiceStore().peek_state("chat-named")) == "asker"
        outcome = plain.answer(
            "chat-named", second.interrupt_id, second.question_id, "b", owner="alice"
        )
        assert outcome.status == FINISHED and outcome.result == {"log": ["a", "b"]}
    finally:
        contrib.unregister("asker")


# Exactly once, across threads and processes


def test_two_answers_at_once_resume_once(concurrently):
    effects = Effects()
    outcome = GraphBridge(question_graph(effects)).start({"log": []}, owner="alice")
    [q] = outcome.questions
    bridges = [GraphBridge(question_graph(effects)) for _ in range(2)]

    def answer(i: int):
        return bridges[i].answer(outcome.thread_id, q.interrupt_id, q.question_id, i, owner="alice")

    results = concurrently(2, answer)
    won = [r for r in results if not isinstance(r, BaseException)]
    assert len(won) == 1 and won[0].status == FINISHED
    assert [type(r) for r in results if isinstance(r, BaseException)] == [AlreadyClaimed]
    assert len(effects.done) == 1


def test_two_questions_answered_at_once_resume_once(concurrently):
    effects = Effects()
    outcome = GraphBridge(question_graph(effects, questions=2)).start({"log": []}, owner="alice")
    questions = outcome.questions
    bridges = [GraphBridge(question_graph(effects, questions=2)) for _ in range(2)]

    def answer(i: int):
        q = questions[i]
        return (
            bridges[i]
            .answer(outcome.thread_id, q.interrupt_id, q.question_id, f"c{i}", owner="alice")
            .status
        )

    results = concurrently(2, answer)
    assert results.count(FINISHED) == 1 and set(results) <= {FINISHED, WAITING, BUSY}
    assert sorted(answer.split(":")[1] for answer in effects.done) == ["c0", "c1"]
    assert GraphBridge(question_graph()).resume(outcome.thread_id).status == BUSY


def test_two_resumes_at_once_run_the_tool_once(reviewer, concurrently):
    first = Mailer(emails(("bob", "call-1")))
    outcome = GraphBridge(first.agent).start({"messages": [("user", "mail bob")]}, owner="alice")
    decide(outcome.pending[0].id, "approve", reviewer)
    racers = [Mailer(says("mailed")) for _ in range(2)]
    results = concurrently(
        2, lambda i: GraphBridge(racers[i].agent).resume(outcome.thread_id).status
    )
    assert sorted(results) == [BUSY, FINISHED]
    assert sum(len(r.sent) for r in racers) == 1


def test_an_answer_and_a_resume_at_once_resume_once(concurrently):
    effects = Effects()
    outcome = GraphBridge(question_graph(effects)).start({"log": []}, owner="alice")
    [q] = outcome.questions
    bridges = [GraphBridge(question_graph(effects)) for _ in range(2)]

    def go(i: int):
        if i == 0:
            return (
                bridges[0]
                .answer(outcome.thread_id, q.interrupt_id, q.question_id, "x", owner="alice")
                .status
            )
        return bridges[1].resume(outcome.thread_id).status

    results = concurrently(2, go)
    assert FINISHED in results and effects.done == ["ask0:x"]
    assert GraphBridge(question_graph(effects)).resume(outcome.thread_id).status == BUSY


def process(tmp_path, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "tests.langgraph_bridge_graphs", *args],
        cwd=ROOT,
        env=site_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_another_process_answers_what_this_one_left_waiting(tmp_path):
    outcome = GraphBridge(question_graph()).start({"log": []}, owner="alice")
    [q] = outcome.questions
    connections.close_all()
    answered = process(tmp_path, "answer", outcome.thread_id, q.interrupt_id, q.question_id, "teal")
    assert answered == {
        "status": FINISHED,
        "result": {"log": ["ask0:teal", "end"]},
        "done": ["ask0:teal"],
    }
    with pytest.raises(AlreadyClaimed):
        GraphBridge(question_graph()).answer(
            outcome.thread_id, q.interrupt_id, q.question_id, "red", owner="alice"
        )


def test_another_process_resumes_a_decided_thread(tmp_path, reviewer):
    first = Mailer(emails(("bob", "call-1")))
    outcome = GraphBridge(first.agent).start({"messages": [("user", "mail bob")]}, owner="alice")
    decide(outcome.pending[0].id, "approve", reviewer)
    resumed = process(tmp_path, "resume", outcome.thread_id)
    assert resumed["status"] == FINISHED and resumed["done"] == ["bob"]
    assert resumed["result"][-1] == "mailed" and first.sent == []
    assert Run.objects.get(run_id=outcome.thread_id).usage == run_usage(2)
    assert GraphBridge(first.agent).resume(outcome.thread_id).status == BUSY
