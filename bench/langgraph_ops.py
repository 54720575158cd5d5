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
- ``conversation``: twenty turns of a chat (a ``MessagesState`` graph whose
  one node answers each human message) on one new thread, one ``invoke`` each;
- ``store put``, ``store get``: one item of a namespace.

Each figure comes with one call's median and 99th percentile time. Then
``storage``: fifty-turn conversations on each saver's emptied tables, and the
bytes on disk of its tables (with their indexes and TOAST) and rows per
checkpoint.
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


def chat(checkpointer: Any) -> Any:
    """A chat: each human message answered by one node, the history in ``messages``."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    def answer(state: MessagesState) -> dict:
        asked = state["messages"][-1].content
        return {
            "messages": [
                AIMessage(
                    f"Here is an answer to {asked!r}, turn {len(state['messages']) // 2 + 1}:"
                    " a few sentences of text, about as long as a model's short reply, which"
                    " the conversation keeps in its history from then on."
                )
            ]
        }

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=checkpointer)


def converse(app: Any, thread_id: str, turns: int) -> None:
    from langchain_core.messages import HumanMessage

    config = {"configurable": {"thread_id": thread_id}}
    for turn in range(turns):
        out = app.invoke(
            {"messages": [HumanMessage(f"Question {turn}: what comes next, and why?")]}, config
        )
    if len(out["messages"]) != 2 * turns:
        raise AssertionError(f"the chat ran wrong: {len(out['messages'])} messages")


def _conversation(make, turns: int = 20) -> Start:
    def start(index: int) -> Op:
        app = chat(make())
        prefix = fresh("chat")
        number = iter(range(10**9))
        return lambda: converse(app, f"{prefix}-{next(number)}", turns)

    return start


OUR_TABLES = (
    "agentstate_thread",
    "agentstate_checkpoint",
    "agentstate_checkpointblob",
    "agentstate_checkpointwrite",
)
THEIR_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def _footprint(tables: tuple[str, ...], checkpoints_table: str) -> dict[str, float]:
    """Bytes on disk of ``tables`` (with indexes and TOAST) and their rows per checkpoint."""
    import psycopg

    with psycopg.connect(env.dsn(), autocommit=True) as conn:
        size = sum(
            conn.execute("SELECT pg_total_relation_size(%s)", [t]).fetchone()[0] for t in tables
        )
        rows = sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables)
        (checkpoints,) = conn.execute(f"SELECT count(*) FROM {checkpoints_table}").fetchone()
    return {
        "bytes": size,
        "rows": rows,
        "checkpoints": checkpoints,
        "bytes_per_checkpoint": round(size / checkpoints, 1),
        "rows_per_checkpoint": round(rows / checkpoints, 3),
    }


def storage(conversations: int = 3, turns: int = 50) -> dict[str, dict[str, float]]:
    """Each saver's footprint after ``conversations`` chats of ``turns`` turns on its
    emptied tables."""
    import psycopg

    with psycopg.connect(env.dsn(), autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(OUR_TABLES + THEIR_TABLES)}")
    footprints = {}
    for side, make, tables in (
        ("theirs", their_saver, THEIR_TABLES),
        ("ours", our_saver, OUR_TABLES),
    ):
        app = chat(make())
        for number in range(conversations):
            converse(app, fresh(f"storage-{number}"), turns)
        footprints[side] = _footprint(tables, tables[1] if side == "ours" else tables[0])
    footprints["ratio"] = {
        key: round(footprints["ours"][key] / footprints["theirs"][key], 3)
        for key in ("bytes_per_checkpoint", "rows_per_checkpoint")
    }
    return footprints


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
        "conversation": (_conversation(our_saver), _conversation(their_saver)),
        "store put": (_store_op(our_store, put), _store_op(their_store, put)),
        "store get": (_store_op(our_store, get), _store_op(their_store, get)),
    }


def measure(seconds: float, only: set[str] | None = None) -> dict:
    """ops/s of ours and theirs at each number of workers (``only``: these operations),
    theirs measured just before ours (the machine drifts), with one call's p50 and
    p99; then ``storage`` (unless ``only`` leaves it out)."""
    from bench.workers import measured

    prepare()
    figures: dict = {}
    for workers in WORKERS:
        figures[str(workers)] = ops = {}
        for name, (ours, theirs) in operations().items():
            if only and name not in only:
                continue
            theirs_figures = measured(theirs, workers, seconds)
            ours_figures = measured(ours, workers, seconds)
            ops[name] = peers.compared(ours_figures, theirs_figures)
        print(f"  {workers} worker(s): done", flush=True)
    if not only or "storage" in only:
        figures["storage"] = storage()
    return figures


TITLE = "vs LangGraph (ops/s)"
LEGEND = "ours: AgentStateSaver, AgentStateStore; theirs: LangGraph's PostgresSaver, PostgresStore"
MARKDOWN_TITLE = "ours / LangGraph's PostgresSaver, PostgresStore"


STORAGE_TITLE = "after fifty-turn conversations"


def report(figures: dict) -> str:
    return peers.report(figures, TITLE, LEGEND) + (
        "\n" + _storage_report(figures["storage"]) if "storage" in figures else ""
    )


def _storage_report(found: dict) -> str:
    lines = [f"{'storage, ' + STORAGE_TITLE:<44}{'ours':>10}{'theirs':>10}{'ratio':>7}"]
    for key, label in (
        ("bytes_per_checkpoint", "bytes on disk per checkpoint"),
        ("rows_per_checkpoint", "rows per checkpoint"),
    ):
        ratio = found["ratio"][key]
        lines.append(
            f"{label:<44}{found['ours'][key]:>10,.1f}{found['theirs'][key]:>10,.1f}"
            f"{ratio:>7.2f} {'ok' if ratio <= STORAGE_GOAL else 'MISSED'}"
        )
    lines.append(
        f"  tables, indexes and TOAST over checkpoints ({found['ours']['checkpoints']:,} ours,"
        f" {found['theirs']['checkpoints']:,} theirs); goal: ratio at most {STORAGE_GOAL}"
    )
    return "\n".join(lines)


STORAGE_GOAL = 0.5


def markdown(figures: dict) -> str:
    table = peers.markdown(figures, MARKDOWN_TITLE)
    if "storage" not in figures:
        return table
    found = figures["storage"]
    rows = [
        f"| storage, {STORAGE_TITLE} | ours | theirs | ratio (≤ {STORAGE_GOAL}) |",
        "|---|--:|--:|--:|",
    ]
    for key, label in (
        ("bytes_per_checkpoint", "bytes on disk per checkpoint"),
        ("rows_per_checkpoint", "rows per checkpoint"),
    ):
        rows.append(
            f"| {label} | {found['ours'][key]:,.1f} | {found['theirs'][key]:,.1f} "
            f"| {found['ratio'][key]:.2f} |"
        )
    return table + "\n" + "\n".join(rows) + "\n"


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
