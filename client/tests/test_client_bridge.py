"""The OpenAI Agents SDK bridge over REST: ``RemoteStore`` with agentstate-client.

The same scripted agent as ``tests/bridges/test_bridge.py``, but every run, request,
decision and saved state goes through a live server: the agent's process
and the reviewer's are clients of it.
"""

import pytest
from agents import RunConfig

from agentstate.contrib.openai_agents import BUSY, FINISHED, WAITING, ApprovalBridge, RemoteStore
from tests.bridges.test_bridge import Mailer, done, email

pytestmark = pytest.mark.django_db(transaction=True)


def bridge(mailer: Mailer, client) -> ApprovalBridge:
    return ApprovalBridge(
        mailer.agent, store=RemoteStore(client), run_config=RunConfig(tracing_disabled=True)
    )


def test_a_remote_run_waits_for_a_reviewer_and_resumes_once(remote, make_user):
    agent_api = remote(make_user("agent"))
    reviewer_api = remote(make_user("reviewer", "agentstate.decide_approvalrequest"))

    first = Mailer(email("bob", "call-1"))
    outcome = bridge(first, agent_api).start("mail bob", run_id="remote-run")
    assert outcome.status == WAITING and first.sent == []
    [request] = outcome.pending
    assert (request.tool_name, request.call_id) == ("send_email", "call-1")

    later = Mailer(done("mailed"))
    assert bridge(later, agent_api).resume("remote-run").status == WAITING
    reviewer_api.decide(request.id, "approve", always=True, reason="fine")
    outcome = bridge(later, agent_api).resume("remote-run")
    assert outcome.status == FINISHED and outcome.final_output == "mailed"
    assert first.sent + later.sent == ["bob"]
    assert agent_api.get_run("remote-run")["usage"]["requests"] == 2
    assert bridge(later, agent_api).resume("remote-run").status == BUSY
