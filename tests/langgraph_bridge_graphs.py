"""Graphs for the GraphBridge tests, and a process that answers or resumes their threads.

Run as ``python -m tests.langgraph_bridge_graphs answer|resume ...`` with Django's
settings in the environment (``tests.concurrency.test_pauses_processes.site_env``): it builds
the same graphs as the test process, does what it is told and prints the
outcome as JSON.
"""

import json
import operator
import sys
import threading
from typing import Annotated, Any, TypedDict

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

STEP_USAGE = {"input_tokens": 10, "output_tokens": 4, "total_tokens": 14}


class State(TypedDict):
    log: Annotated[list[str], operator.add]


class Effects:
    """What the nodes did after their interrupts, across the threads of a process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: list[str] = []

    def add(self, item: str) -> None:
        with self.lock:
            self.done.append(item)


def question_graph(effects: Effects | None = None, *, questions: int = 1) -> StateGraph:
    """``questions`` nodes run in parallel, each asking one question; then ``end``."""
    builder = StateGraph(State)

    def asker(name: str):
        def node(state: State) -> dict[str, Any]:
            answer = interrupt({"question": f"colour for {name}?"})
            if effects is not None:
                effects.add(f"{name}:{answer}")
            return {"log": [f"{name}:{answer}"]}

        return node

    builder.add_node("end", lambda state: {"log": ["end"]})
    for index in range(questions):
        name = f"ask{index}"
        builder.add_node(name, asker(name))
        builder.add_edge(START, name)
    builder.add_edge([f"ask{index}" for index in range(questions)], "end")
    builder.add_edge("end", END)
    return builder


def two_in_a_row() -> StateGraph:
    """One node asking two questions, one after the other: two stops."""

    def ask(state: State) -> dict[str, Any]:
        return {"log": [interrupt("first?"), interrupt("second?")]}

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder


class ScriptedChatModel(FakeMessagesListChatModel):
    """Replays its scripted messages, one per call, recording what it was sent."""

    sent: list[list[Any]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.sent.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def emails(*calls: tuple[str, str]) -> AIMessage:
    """A model turn calling ``send_email`` once per ``(to, call_id)``."""
    return AIMessage(
        "",
        tool_calls=[{"name": "send_email", "args": {"to": to}, "id": cid} for to, cid in calls],
        usage_metadata=STEP_USAGE,
    )


def says(text: str) -> AIMessage:
    return AIMessage(text, usage_metadata=STEP_USAGE)


class Mailer:
    """``create_agent`` with a scripted model and an approval-gated ``send_email``."""

    def __init__(self, *turns: AIMessage, mode: str = "batched", review: Any = True) -> None:
        self.sent: list[str] = []
        self.model = ScriptedChatModel(responses=list(turns), sent=[])

        @tool
        def send_email(to: str) -> str:
            """Send an email."""
            self.sent.append(to)
            return f"sent to {to}"

        self.agent = create_agent(
            self.model,
            tools=[send_email],
            middleware=[
                HumanInTheLoopMiddleware(interrupt_on={"send_email": review}, interrupt_mode=mode)
            ],
            checkpointer=_saver(),
        )


def _saver():
    from agentstate.contrib.langgraph import AgentStateSaver

    return AgentStateSaver()


def main(argv: list[str]) -> None:
    import django

    django.setup()
    from agentstate.contrib.langgraph import GraphBridge

    command, *args = argv
    if command == "answer":
        thread_id, interrupt_id, question_id, value = args
        effects = Effects()
        bridge = GraphBridge(question_graph(effects))
        outcome = bridge.answer(thread_id, interrupt_id, question_id, value, owner="alice")
        done = effects.done
    else:
        [thread_id] = args
        mailer = Mailer(says("mailed"))
        outcome = GraphBridge(mailer.agent).resume(thread_id)
        done = mailer.sent
    result = outcome.result
    if isinstance(result, dict) and "messages" in result:
        result = [message.content for message in result["messages"]]
    print(json.dumps({"status": outcome.status, "result": result, "done": done}))


if __name__ == "__main__":
    main(sys.argv[1:])
