"""Ours beside LangGraph's own PostgreSQL savers and store, on the same database.

    .venv/bin/python bench/langgraph_ops.py [--seconds 2]   # this section alone

Each entry maps an operation to ``(ours, theirs)``, two ``start(index)``
functions (see ``bench.workers``): ``AgentStateSaver`` beside LangGraph's
``PostgresSaver`` and ``AgentStateStore`` beside its ``PostgresStore``. Theirs
run on a psycopg connection of their own, opened the way their documentation
opens it (autocommit, ``prepare_threshold=0``, rows as dicts); ours on
Django's connection. A worker uses its own threads and namespaces.

- ``saver put``: one checkpoint with two new channel values, each put the
  next one's parent (a growing thread, as a running graph's);
- ``saver get_tuple``: the latest checkpoint of a thread, with its two
  channel values and one task's two pending writes;
- ``graph run``: one ``invoke`` of a three-node ``StateGraph`` (three
  channels) on a new thread: the read of the thread's latest checkpoint, then
  four checkpoints and three tasks' writes;
- ``store put``, ``store get``: one item of a namespace.
"""

import argparse
import operator
import random
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import env, peers
from bench.workers import Op, Start

WORKERS = (1, 8)
TAG = uuid.uuid4().hex[:8]


def fresh(label: str) -> str:
    return f"bench/{label}/{TAG}-{uuid.uuid4().hex[:12]}"


def _connection():
    import psycopg
    from psycopg.rows import dict_row

    return psycopg.connect(env.dsn(), autocommit=True, prepare_threshold=0, row_factory=dict_row)


def their_saver():
    from langgraph.checkpoint.postgres import PostgresSaver

    return PostgresSaver(_connection())


def their_store():
    from langgraph.store.postgres import PostgresStore

    return PostgresStore(_connection())


def our_saver():
    from agentstate.contrib.langgraph import AgentStateSaver

    return AgentStateSaver()


def our_store():
    from agentstate.contrib.langgraph import AgentStateStore

    return AgentStateStore()


def prepare() -> None:
    """LangGraph's tables (their ``setup()``), on the benchmark's database."""
    for made in (their_saver(), their_store()):
        made.setup()
        made.conn.close()


MESSAGES = ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbb"]


def _checkpoint(step: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """A checkpoint of step ``step`` with two channels written at it: checkpoint,
    metadata, new versions."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    version = f"{step:032}.{random.random():016}"
    checkpoint: dict[str, Any] = dict(empty_checkpoint())
    checkpoint["id"] = str(uuid6(clock_seq=step))
    checkpoint["channel_values"] = {"messages": MESSAGES + [f"m{step}"], "step": step}
    checkpoint["channel_versions"] = {"messages": version, "step": version}
    checkpoint["versions_seen"] = {"node": {"messages": version}}
    metadata = {"source": "loop", "step": step, "parents": {}}
    return checkpoint, metadata, {"messages": version, "step": version}


def _saver_put(make) -> Start:
    def start(index: int) -> Op:
        saver = make()
        config: dict[str, Any] = {
            "configurable": {"thread_id": fresh("saver-put"), "checkpoint_ns": ""}
        }
        step = iter(range(10**9))

        def put() -> None:
            nonlocal config
            checkpoint, metadata, versions = _checkpoint(next(step))
            config = saver.put(config, checkpoint, metadata, versions)

        return put

    return start


def _saver_get(make) -> Start:
    def start(index: int) -> Op:
        saver = make()
        thread = {"configurable": {"thread_id": fresh("saver-get"), "checkpoint_ns": ""}}
        config = thread
        for step in range(3):
            checkpoint, metadata, versions = _checkpoint(step)
            config = saver.put(config, checkpoint, metadata, versions)
        saver.put_writes(config, [("messages", ["c"]), ("step", 3)], "task-1")
        if saver.get_tuple(thread) is None:
            raise AssertionError("the thread's checkpoint was not found")
        return lambda: saver.get_tuple(thread)

    return start


class State(TypedDict):
    messages: Annotated[list[str], operator.add]
    count: int
    note: str


def graph(checkpointer: Any) -> Any:
    """Three nodes one after another, each writing two of the three channels."""
    from langgraph.graph import END, START, StateGraph

    def first(state: State) -> dict:
        return {"messages": ["first"], "count": state["count"] + 1}

    def second(state: State) -> dict:
        return {"messages": ["second"], "note": f"seen {len(state['messages'])}"}

    def third(state: State) -> dict:
        return {"messages": ["third"], "count": state["count"] + 1}

    builder = StateGraph(State)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_node("third", third)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", "third")
    builder.add_edge("third", END)
    return builder.compile(checkpointer=checkpointer)


def _graph_run(make) -> Start:
    def start(index: int) -> Op:
        app = graph(make())
        prefix = fresh("graph")
        number = iter(range(10**9))

        def run() -> None:
            config = {"configurable": {"thread_id": f"{prefix}-{next(number)}"}}
            out = app.invoke({"messages": ["hi"], "count": 0, "note": ""}, config)
            if out["count"] != 2:
                raise AssertionError(f"the graph ran wrong: {out!r}")

        return run

    return start


def _store_op(make, call) -> Start:
    def start(index: int) -> Op:
        store = make()
        namespace = ("bench", fresh("store"))
        store.put(namespace, "v", {"step": 7})
        return lambda: call(store, namespace)

    return start


def operations() -> dict[str, tuple[Start, Start]]:
    """Each operation: ``(ours, theirs)``."""

    def put(store, namespace):
        return store.put(namespace, "v", {"step": 7})

    def get(store, namespace):
        return store.get(namespace, "v")

    return {
        "saver put": (_saver_put(our_saver), _saver_put(their_saver)),
        "saver get_tuple": (_saver_get(our_saver), _saver_get(their_saver)),
        "graph run": (_graph_run(our_saver), _graph_run(their_saver)),
        "store put": (_store_op(our_store, put), _store_op(their_store, put)),
        "store get": (_store_op(our_store, get), _store_op(their_store, get)),
    }


def measure(seconds: float, only: set[str] | None = None) -> dict:
    """ops/s of ours and theirs at each number of workers (``only``: these operations),
    theirs measured just before ours (the machine drifts)."""
    from bench.workers import rate

    prepare()
    figures: dict = {}
    for workers in WORKERS:
        figures[str(workers)] = ops = {}
        for name, (ours, theirs) in operations().items():
            if only and name not in only:
                continue
            theirs_rate = rate(theirs, workers, seconds)
            ours_rate = rate(ours, workers, seconds)
            ops[name] = {
                "ours": round(ours_rate, 1),
                "theirs": round(theirs_rate, 1),
                "ratio": round(ours_rate / theirs_rate, 3),
            }
        print(f"  {workers} worker(s): done", flush=True)
    return figures


TITLE = "vs LangGraph (ops/s)"
LEGEND = "ours: AgentStateSaver, AgentStateStore; theirs: LangGraph's PostgresSaver, PostgresStore"
MARKDOWN_TITLE = "ours / LangGraph's PostgresSaver, PostgresStore"


def report(figures: dict) -> str:
    return peers.report(figures, TITLE, LEGEND)


def markdown(figures: dict) -> str:
    return peers.markdown(figures, MARKDOWN_TITLE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2)
    parser.add_argument("--only", action="append", help="an operation's name (repeatable)")
    args = parser.parse_args()
    env.create_database()
    env.setup_django()
    env.migrate()
    figures = measure(args.seconds, set(args.only or ()))
    print(report(figures))
    print()
    print(markdown(figures))


if __name__ == "__main__":
    main()
