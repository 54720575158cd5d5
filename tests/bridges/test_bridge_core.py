"""The bridges' shared core: one wording for each decision, and a core that needs no site.

Each adapter tells the model of a call that did not run in the core's words
(``Review.refusal``: the reviewer's reason, ``REJECTED``, ``EXPIRED``; ``Review.not_run``
for an edit that cannot run). The core imports no model, so a Pydantic AI agent
in a process without Django's settings runs through ``RemoteStore``.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentstate.contrib.core import EXPIRED, REJECTED, Review
from agentstate.contrib.kept import UsageDelta, usage
from agentstate.contrib.langgraph.bridge import _decision as langgraph_decision
from agentstate.contrib.pydantic_ai import _decision as pydantic_ai_decision
from agentstate.models import ApprovalRequest, Run
from tests.bridges.test_bridge import Mailer, done, email
from tests.bridging import review_in_thread

ROOT = Path(__file__).resolve().parents[2]


def review(status: str, reason: str = "", approved_arguments=None) -> Review:
    return Review(
        1, "send_email", "call-1", {"to": "bob"}, status, False, reason, approved_arguments
    )


@pytest.mark.parametrize(
    ("decided", "heard"),
    [
        (review("rejected", "not bob"), "not bob"),
        (review("expired"), EXPIRED),
    ],
)
def test_the_frameworks_hear_the_same_words(decided, heard):
    assert pydantic_ai_decision(decided).message == heard
    assert langgraph_decision(decided, None) == {"type": "reject", "message": heard}


def test_a_reasonless_rejection_and_an_edit_that_cannot_run():
    assert pydantic_ai_decision(review("rejected")).message == REJECTED
    # LangGraph's middleware has its own words for it: not to retry the call
    assert langgraph_decision(review("rejected"), None) == {"type": "reject"}
    edited = review("approved", approved_arguments=[1])
    assert pydantic_ai_decision(edited).message.startswith(
        "A reviewer approved this call only with other arguments, [1], which"
    )
    assert edited.not_run("which x").endswith("[1], which x: it did not run.")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("decide", "heard"), [("reject", REJECTED), ("expire", EXPIRED)])
def test_the_agents_sdk_hears_the_cores_words(make_user, decide, heard):
    first = Mailer(email("eve", "call-1"))
    outcome = first.bridge().start("mail eve")
    [request] = outcome.pending
    if decide == "expire":
        ApprovalRequest.objects.filter(pk=request.id).update(status="expired")
    else:
        review_in_thread(request.id, "reject", make_user("reviewer"))
    later = Mailer(done("did not mail"))
    assert later.bridge().resume(outcome.run_id).final_output == "did not mail"
    sent_back = [
        item for item in later.model.inputs[-1] if item.get("type") == "function_call_output"
    ]
    assert [item["output"] for item in sent_back] == [heard]
    assert first.sent == later.sent == []


PROBE = textwrap.dedent(
    """
    import sys

    from pydantic_ai import Agent, DeferredToolRequests, ToolCallPart
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from agentstate.contrib.pydantic_ai import DeferredBridge, RemoteStore


    class Client:  # agentstate-client's calls the bridge makes, in memory
        def __init__(self):
            self.kept, self.requests, self.usage = {}, [], []

        def create_run(self, run_id, context):
            return {"run_id": run_id, "context": context}

        def add_usage(self, run_id, **usage):
            self.usage.append(usage["requests"])

        def request_approval(self, run_id, tool_name, call_id, arguments):
            request = {"id": 1, "tool_name": tool_name, "call_id": call_id,
                       "arguments": arguments, "status": "pending"}
            self.requests.append(request)
            return request, True

        def approvals(self, run_id):
            return {}

        def list_approval_requests(self, run_id):
            return self.requests

        def put(self, scope, key, value):
            self.kept[key] = value

        def pop(self, scope, key):
            return self.kept.pop(key)


    def model(messages, info):
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("send_email", {"to": "bob"}, "call-1")])
        return ModelResponse(parts=[TextPart("mailed")])


    agent = Agent(FunctionModel(model), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def send_email(to: str) -> str:
        return "sent"

    client = Client()
    bridge = DeferredBridge(agent, store=RemoteStore(client))
    assert bridge.start("mail bob", run_id="run-1").status == "waiting"
    client.requests[0]["status"] = "approved"
    outcome = bridge.resume("run-1")
    assert (outcome.status, outcome.final_output, client.usage) == ("finished", "mailed", [1, 1])
    assert "agentstate.models" not in sys.modules
    print("ok")
    """
)


def outside_the_site(probe: str) -> None:
    """Run ``probe`` in a process without Django's settings: it prints ``ok``."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done_ = subprocess.run(
        [sys.executable, "-c", probe],
        env={**env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done_.returncode == 0, done_.stderr
    assert done_.stdout.strip() == "ok"


def test_a_pydantic_ai_agent_outside_the_site_needs_no_django_settings():
    outside_the_site(PROBE)


def test_a_steps_usage_has_the_runs_counters():
    """``UsageDelta`` spells the counters out for the type checker: they stay a run's."""
    assert tuple(UsageDelta.__annotations__) == Run.USAGE_FIELDS
    assert usage(requests=1, cached_tokens=2) == dict.fromkeys(Run.USAGE_FIELDS, 0) | {
        "requests": 1,
        "cached_tokens": 2,
    }


SDK_PROBE = textwrap.dedent(
    """
    import sys

    from agents import Agent

    from agentstate.contrib.openai_agents import ApprovalBridge, RemoteStore, context_tools

    bridge = ApprovalBridge(Agent(name="ops"), store=RemoteStore(object()))
    assert callable(context_tools)
    assert "agentstate.models" not in sys.modules and "agentstate.services" not in sys.modules
    print("ok")
    """
)


def test_the_agents_sdk_bridge_outside_the_site_needs_no_django_settings():
    """docs/openai-agents.md's ``RemoteStore``: a process that is not the site imports the
    bridge; the session and the context tools, which need the site, load when used."""
    outside_the_site(SDK_PROBE)
