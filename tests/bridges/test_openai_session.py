"""AgentStateSession: the Agents SDK's Session protocol on a context list, through the
SDK's own Runner with a scripted model (no network), and across processes.

The coroutines run under ``async_to_sync``, so that the session's thread-sensitive
``sync_to_async`` calls run on the test's thread and connection.
"""

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agents import Agent, RunConfig, Runner
from agents.memory import Session, SessionSettings
from agents.testing import assistant_message
from asgiref.sync import async_to_sync

from agentstate.contrib.openai_agents import SESSION_SCOPE, AgentStateSession
from agentstate.exceptions import BadInput, TypeConflict
from agentstate.models import Variable
from agentstate.services import context
from tests.bridges.test_bridge import ScriptedModel
from tests.concurrency.test_pauses_processes import site_env

ROOT = Path(__file__).resolve().parents[2]


def run(coroutine_function, *args, **kwargs):
    return async_to_sync(coroutine_function)(*args, **kwargs)


def message(text: str, role: str = "user") -> dict:
    return {"role": role, "content": text}


def texts(items: list) -> list[str]:
    """Each item's text: a message's content, an output message's first text part."""
    found = []
    for item in items:
        content = item["content"]
        found.append(content if isinstance(content, str) else content[0]["text"])
    return found


@pytest.mark.django_db
class TestProtocol:
    def test_it_is_an_sdk_session(self):
        session = AgentStateSession("chat-1")
        assert isinstance(session, Session)
        assert session.session_id == "chat-1" and session.scope == SESSION_SCOPE == (
            "agentstate.sessions"
        )

    def test_add_get_pop_clear(self):
        session = AgentStateSession("chat-1")
        assert run(session.get_items) == [] and run(session.pop_item) is None
        run(session.add_items, [message("a"), message("b")])
        run(session.add_items, [])
        run(session.add_items, [message("c", "assistant")])
        assert run(session.get_items) == [message("a"), message("b"), message("c", "assistant")]
        assert run(session.get_items, 2) == [message("b"), message("c", "assistant")]
        assert run(session.get_items, 10) == run(session.get_items)
        assert run(session.get_items, 0) == []
        # A negative limit reads every item, as the SDK's SQLiteSession does.
        assert run(session.get_items, -1) == run(session.get_items)
        assert run(session.pop_item) == message("c", "assistant")
        assert run(session.get_items) == [message("a"), message("b")]
        run(session.clear_session)
        run(session.clear_session)  # nothing left to clear is no error
        assert run(session.get_items) == [] and run(session.pop_item) is None
        assert not Variable.objects.filter(name="chat-1").exists()

    def test_popping_the_last_item_empties_the_session(self):
        session = AgentStateSession("chat-1")
        run(session.add_items, [message("only")])
        assert run(session.pop_item) == message("only")
        assert run(session.pop_item) is None and run(session.get_items) == []

    def test_each_item_is_one_element_of_the_sessions_list(self, alice):
        session = AgentStateSession("chat-1", owner=alice)
        run(session.add_items, [message("a"), message("b")])
        stored = context.get_list(SESSION_SCOPE, "chat-1", owner=alice)
        assert (stored.values, stored.length) == ([message("a"), message("b")], 2)

    def test_the_settings_limit_is_the_default_limit(self):
        session = AgentStateSession("chat-1", session_settings=SessionSettings(limit=2))
        run(session.add_items, [message(str(i)) for i in range(5)])
        assert texts(run(session.get_items)) == ["3", "4"]
        assert texts(run(session.get_items, 3)) == ["2", "3", "4"]
        # A dict, as the SDK's own sessions take it.
        given = AgentStateSession("chat-1", session_settings={"limit": 1})
        assert isinstance(given.session_settings, SessionSettings)
        assert texts(run(given.get_items)) == ["4"]

    def test_owners_and_session_ids_keep_apart(self, alice, bob):
        run(AgentStateSession("chat", owner=alice).add_items, [message("alice's")])
        run(AgentStateSession("chat", owner="bob").add_items, [message("bob's")])
        run(AgentStateSession("other", owner=alice).add_items, [message("other")])
        assert texts(run(AgentStateSession("chat", owner="alice").get_items)) == ["alice's"]
        assert texts(run(AgentStateSession("chat", owner=bob).get_items)) == ["bob's"]
        assert run(AgentStateSession("chat").get_items) == []
        run(AgentStateSession("chat", owner=alice).clear_session)
        assert texts(run(AgentStateSession("chat", owner=bob).get_items)) == ["bob's"]

    @pytest.mark.parametrize("bad", ["", "x" * 256, 7, None])
    def test_a_bad_session_id_is_refused_at_once(self, bad):
        with pytest.raises(BadInput) as refused:
            AgentStateSession(bad)
        assert refused.value.field == "session_id"

    def test_items_that_are_not_json_are_refused_and_nothing_is_added(self):
        session = AgentStateSession("chat-1")
        run(session.add_items, [message("kept")])
        with pytest.raises(BadInput):
            run(session.add_items, [message("a"), {"role": "user", "content": {1, 2}}])
        assert texts(run(session.get_items)) == ["kept"]

    def test_a_variable_that_is_not_a_list_is_a_type_conflict_not_an_empty_session(self):
        context.put(SESSION_SCOPE, "chat-1", {"not": "a list"})
        with pytest.raises(TypeConflict):
            run(AgentStateSession("chat-1").get_items)

    def test_the_event_loop_keeps_running_during_a_call(self):
        session = AgentStateSession("chat-1")

        async def both() -> int:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            ticker = asyncio.ensure_future(tick())
            await session.add_items([message(str(i)) for i in range(200)])
            await session.get_items()
            ticker.cancel()
            return ticks

        assert run(both) > 0


@pytest.mark.django_db
def test_the_runner_carries_history_across_runs_and_session_objects():
    model = ScriptedModel([[assistant_message("Hello Ann")], [assistant_message("You are Ann")]])
    agent = Agent(name="chat", model=model)
    config = RunConfig(tracing_disabled=True)

    first = run(
        Runner.run, agent, "My name is Ann", session=AgentStateSession("chat-1"), run_config=config
    )
    assert first.final_output == "Hello Ann"
    # A new session object, as another process would make: the history is the stored one.
    second = run(
        Runner.run,
        agent,
        "What is my name?",
        session=AgentStateSession("chat-1"),
        run_config=config,
    )
    assert second.final_output == "You are Ann"
    assert texts(model.inputs[1]) == ["My name is Ann", "Hello Ann", "What is my name?"]
    stored = run(AgentStateSession("chat-1").get_items)
    assert texts(stored) == ["My name is Ann", "Hello Ann", "What is my name?", "You are Ann"]
    # Another session id starts empty.
    run(
        Runner.run,
        Agent(name="other", model=ScriptedModel([[assistant_message("hi")]])),
        "x",
        session=AgentStateSession("chat-2"),
        run_config=config,
    )
    assert texts(run(AgentStateSession("chat-2").get_items)) == ["x", "hi"]


WRITER = """
import asyncio, sys, time
from pathlib import Path

import django

django.setup()
from agentstate.contrib.openai_agents_session import AgentStateSession

writer, folder, batches, size = int(sys.argv[1]), Path(sys.argv[2]), *map(int, sys.argv[3:])
session = AgentStateSession("crowd")


async def main():
    (folder / f"ready-{writer}").touch()
    while not (folder / "go").exists():
        await asyncio.sleep(0.01)
    for batch in range(batches):
        await session.add_items(
            [{"role": "user", "content": f"{writer}:{batch}:{i}"} for i in range(size)]
        )


asyncio.run(main())
"""


@pytest.mark.django_db(transaction=True)
def test_twenty_processes_adding_at_once_lose_nothing_and_keep_each_writers_order(tmp_path):
    writers, batches, size = 20, 5, 4
    env = site_env(tmp_path, DJANGO_SETTINGS_MODULE="tests.settings")
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(i), str(tmp_path), str(batches), str(size)],
            cwd=ROOT,
            env=env,
            stderr=open(tmp_path / f"writer-{i}.log", "w"),
        )
        for i in range(writers)
    ]
    try:
        deadline = time.monotonic() + 300
        while len(list(tmp_path.glob("ready-*"))) < writers:
            assert time.monotonic() < deadline, "the writers did not start"
            assert all(p.poll() in (None, 0) for p in processes), "a writer failed to start"
            time.sleep(0.05)
        (tmp_path / "go").touch()
        codes = [p.wait(300) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    logs = {i: (tmp_path / f"writer-{i}.log").read_text() for i in range(writers)}
    assert codes == [0] * writers, {i: log for i, log in logs.items() if log}

    items = run(AgentStateSession("crowd").get_items)
    assert len(items) == writers * batches * size
    seen = [tuple(int(part) for part in item["content"].split(":")) for item in items]
    assert len(set(seen)) == len(seen)  # nothing twice
    for writer in range(writers):  # each writer's items, in the order it added them
        own = [(batch, i) for w, batch, i in seen if w == writer]
        assert own == [(batch, i) for batch in range(batches) for i in range(size)]
    # Each add_items is one step: its items stand together.
    for start in range(0, len(seen), size):
        chunk = seen[start : start + size]
        assert len({(w, batch) for w, batch, _ in chunk}) == 1, chunk
