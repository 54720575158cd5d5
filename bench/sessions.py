"""The Agents SDK's session memory: ``AgentStateSession`` beside the SDK's ``SQLAlchemySession``.

    .venv/bin/python bench/sessions.py            # on its own (2 s measurements)
    .venv/bin/python bench/sessions.py --quick    # 1 s measurements

Both on the benchmark's PostgreSQL (``bench.env``): the SDK's session through
``create_async_engine("postgresql+psycopg://...")`` with ``create_tables=True``
(its tables made once before the workers start), ours through the Django
site. Each worker process (``bench.workers``) has its own session id, one event
loop and one connection, and runs one async method to completion per
operation:

- ``add_items``: one call adding a turn (two items: the user's and the reply);
- ``get_items(10), history 10`` and ``history 10,000``: the last 10 items of a
  session holding 10, or 10,000, items;
- ``pop_item``: the latest item of a session filled beforehand.

The figure compared is ours over theirs (the goal: more than 1.0).
"""

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import peers
from bench.env import dsn
from bench.workers import Op, Start, measured

WORKERS = (1, 8)
RATE_CEILING = 5000  # operations per second per core that a pop supply must outlast
USER = {"role": "user", "content": "What is the weather in Paris today, and should I cycle?"}
REPLY = {
    "id": "msg_0",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Sunny, 21 degrees: cycle.", "annotations": []}],
}
TURN = [USER, REPLY]
TABLES = ("bench_agent_sessions", "bench_agent_messages")


def _url() -> str:
    return dsn().replace("postgresql://", "postgresql+psycopg://", 1)


def _history(length: int) -> list[dict[str, Any]]:
    return [USER if i % 2 == 0 else REPLY for i in range(length)]


def _fresh(label: str, index: int) -> str:
    return f"bench-{label}-{index}-{uuid.uuid4().hex[:12]}"


class Ours:
    def __init__(self, label: str, index: int) -> None:
        from agentstate.contrib.openai_agents_session import AgentStateSession

        self.session = AgentStateSession(_fresh(label, index))
        self.loop = asyncio.new_event_loop()

    def fill(self, length: int) -> None:
        """``length`` items, written through the service (no event loop needed)."""
        from agentstate.services import context

        if length:
            session = self.session
            context.extend(session.scope, session.session_id, _history(length))

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)


class Theirs(Ours):
    def __init__(self, label: str, index: int) -> None:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
        from sqlalchemy.ext.asyncio import create_async_engine

        self.loop = asyncio.new_event_loop()
        engine = create_async_engine(_url(), pool_size=1)
        self.session = SQLAlchemySession(
            _fresh(label, index),
            engine=engine,
            create_tables=True,
            sessions_table=TABLES[0],
            messages_table=TABLES[1],
        )

    def fill(self, length: int) -> None:
        if length:
            self.run(self.session.add_items(_history(length)))


def _operations(kind: type[Ours], supply: int) -> dict[str, Start]:
    def add_items(i: int) -> Op:
        side = kind("add", i)
        return lambda: side.run(side.session.add_items(TURN))

    def get_items(length: int) -> Start:
        def start(i: int) -> Op:
            side = kind(f"get{length}", i)
            side.fill(length)
            return lambda: side.run(side.session.get_items(10))

        return start

    def pop_item(i: int) -> Op:
        side = kind("pop", i)
        side.fill(supply)

        def op() -> None:
            if side.run(side.session.pop_item()) is None:
                raise StopIteration  # the supply ran out

        return op

    return {
        "add_items": add_items,
        "get_items(10), history 10": get_items(10),
        "get_items(10), history 10,000": get_items(10_000),
        "pop_item": pop_item,
    }


def _create_tables() -> None:
    """The SDK session's tables, made once (workers creating them at once would race)."""
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    async def create() -> None:
        engine = create_async_engine(_url())
        session = SQLAlchemySession(
            "bench-tables",
            engine=engine,
            create_tables=True,
            sessions_table=TABLES[0],
            messages_table=TABLES[1],
        )
        await session.get_items()
        await engine.dispose()

    asyncio.run(create())


def measure(seconds: float, workers_list: tuple[int, ...] = WORKERS) -> dict:
    """``{workers: {operation: figures}}``: operations per second and one call's
    times (``bench.peers.compared``)."""
    import os

    _create_tables()
    figures: dict[str, dict[str, dict[str, float]]] = {}
    for workers in workers_list:
        supply = int(seconds * RATE_CEILING / min(workers, os.cpu_count() or 1))
        ours, theirs = _operations(Ours, supply), _operations(Theirs, supply)
        figures[str(workers)] = ops = {}
        for name in ours:
            mine = measured(ours[name], workers, seconds)
            ops[name] = peers.compared(mine, measured(theirs[name], workers, seconds))
        print(f"  {workers} worker(s): done", flush=True)
    return figures


TITLE = "vs SQLAlchemySession"
LEGEND = "ours: AgentStateSession; theirs: the Agents SDK's SQLAlchemySession on psycopg"
MARKDOWN_TITLE = "ours / the Agents SDK's SQLAlchemySession"


def report(figures: dict) -> str:
    return peers.report(figures, TITLE, LEGEND)


def markdown(figures: dict) -> str:
    return peers.markdown(figures, MARKDOWN_TITLE)


def main() -> None:
    import argparse

    from bench import env

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s measurements")
    args = parser.parse_args()
    env.create_database()
    env.setup_django()
    env.migrate()
    figures = measure(1 if args.quick else 2)
    print(report(figures))
    print()
    print(markdown(figures))


if __name__ == "__main__":
    main()
