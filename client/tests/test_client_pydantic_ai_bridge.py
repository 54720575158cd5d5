"""The Pydantic AI bridge over REST: ``RemoteStore`` with agentstate-client.

The same scripted agent as ``tests/bridges/test_pydantic_ai_bridge.py``, but every run,
request, decision and kept history goes through a live server: the agent's
process and the reviewer's are clients of it.
"""

import pytest

from agentstate.contrib.pydantic_ai import BUSY, FINISHED, WAITING, DeferredBridge, RemoteStore
from tests.bridges.test_pydantic_ai_bridge import Mailer, done, email, usage_of

pytestmark = pytest.mark.django_db(transaction=True)


def bridge(mailer: Mailer, client) -> DeferredBridge:
    return DeferredBridge(mailer.agent, store=RemoteStore(client))


def test_a_remote_run_waits_for_reviewers_and_resumes_once(remote, make_user):
    agent_api = remote(make_user("agent"))
    reviewer_api = remote(make_user("reviewer", "agentstate.decide_approvalrequest"))

    first = Mailer(email("bob", "call-1") + email("eve", "call-2"))
    outcome = bridge(first, agent_api).start("mail bob and eve", run_id="remote-pa")
    assert outcome.status == WAITING and first.sent == []
    assert [(r.call_id, r.arguments) for r in outcome.pending] == [
        ("call-1", {"to": "bob"}),
        ("call-2", {"to": "eve"}),
    ]
    bob, eve = outcome.pending

    later = Mailer(done("mailed"))
    reviewer_api.decide(bob.id, "approve", arguments={"to": "carol"})
    assert bridge(later, agent_api).resume("remote-pa").status == WAITING
    reviewer_api.decide(eve.id, "reject", reason="not eve")
    outcome = bridge(later, agent_api).resume("remote-pa")
    assert outcome.status == FINISHED and outcome.final_output == "mailed"
    assert first.sent + later.sent == ["carol"]
    returned = {p.tool_call_id: p.content for p in later.returned()}
    assert returned == {"call-1": "sent to carol", "call-2": "not eve"}
    assert agent_api.get_run("remote-pa")["usage"] == usage_of(2)
    assert bridge(later, agent_api).resume("remote-pa").status == BUSY
