"""A bridged agent for processes other than the test's: an app that registers it.

``tests.bridged_site`` (the demo site's settings plus this app) runs it in a
Celery worker, so a decision taken in the test's process is resumed there. The
model is a pure function of what it is sent (no script to share between
processes): first it asks to send an email, and once the call has an output it
answers "done". The tool pushes each address it really sends to onto the context
variable ``sent`` of scope ``bridged``, so the test sees every execution.
"""

from agents import Agent, ModelResponse, RunConfig, Usage, function_tool
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from django.apps import AppConfig

from agentstate.contrib import register

NAME = "mailer"


class MailerModel(Model):
    async def get_response(self, system_instructions, input, *args, **kwargs) -> ModelResponse:
        answered = any(
            isinstance(item, dict) and item.get("type") == "function_call_output"
            for item in (input if isinstance(input, list) else [])
        )
        output = (
            [assistant_message("done")]
            if answered
            else [function_call("send_email", {"to": "bob@example.com"}, call_id="call-1")]
        )
        return ModelResponse(
            output=output,
            usage=Usage(requests=1, input_tokens=10, output_tokens=4, total_tokens=14),
            response_id=None,
        )

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the bridge does not stream")


@function_tool(needs_approval=True)
def send_email(to: str) -> str:
    """Send an email (after ``BRIDGED_TOOL_SECONDS``, a slow call a worker may die in;
    the worker's pid is kept in ``bridged``/``worker`` meanwhile)."""
    import os
    import time

    from agentstate.services import context

    if delay := float(os.environ.get("BRIDGED_TOOL_SECONDS", "0")):
        context.put("bridged", "worker", os.getppid())
        time.sleep(delay)
    context.push("bridged", "sent", to)
    return f"sent to {to}"


def mailer():
    from agentstate.contrib.openai_agents import ApprovalBridge  # imports the models

    agent = Agent(name="mailer", model=MailerModel(), tools=[send_email])
    return ApprovalBridge(agent, run_config=RunConfig(tracing_disabled=True))


class BridgedConfig(AppConfig):
    name = "tests.bridged"
    label = "bridged"

    def ready(self) -> None:
        register(NAME, mailer())
