"""Per-operation costs of the LangGraph saver and store, ours and LangGraph's own,
that do not move with the machine's load.

    .venv/bin/python bench/lg_instr.py OPERATION --side ours|theirs --n N [--server] [--calls]
    valgrind --tool=callgrind --callgrind-out-file=/tmp/x \\
        .venv/bin/python bench/lg_instr.py turn --side ours --n 10

Operations (``bench/langgraph_ops.py``'s): ``turn``, a conversation of ``--n``
turns on a new thread (the difference of two lengths is a turn's cost at that
length of history); ``graph``, ``--n`` runs of the three-node graph, each on a
new thread; ``get_tuple``, ``--n`` reads of a twenty-turn conversation's
latest checkpoint; ``store put``, ``--n`` puts of one item. Each first runs the
operation a few times unmeasured (the connections opened, the plans made).
Under callgrind, the instructions of two runs of different ``--n``,
differenced and divided, are one operation's in this process. ``--server``
prints the CPU of the database's server processes of this database per
operation (``/proc/<pid>/schedstat``); ``--calls``, Python's function calls
(cProfile).
"""

import sys
from pathlib import Path

# This folder's profile.py would stand for the standard library's, which cProfile imports.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import cProfile
import pstats
from collections.abc import Callable

from bench import env

WARM = 3


def _server_cpu(conn) -> dict[int, float]:
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid()"
    ).fetchall()
    return {pid: env.cpu_seconds(pid) or 0.0 for (pid,) in rows}


def operation(name: str, side: str) -> Callable[[int], None]:
    """``run(n)``: ``n`` of the operation (``turn``: one conversation of ``n`` turns)."""
    from bench import langgraph_ops as lg

    make = {"ours": lg.our_saver, "theirs": lg.their_saver}[side]
    if name == "turn":
        app = lg.chat(make())
        return lambda n: lg.converse(app, lg.fresh("instr-chat"), n)
    if name == "graph":
        app = lg.graph(make())

        def runs(n: int) -> None:
            for _ in range(n):
                config = {"configurable": {"thread_id": lg.fresh("instr-graph")}}
                app.invoke({"messages": ["hi"], "count": 0, "note": ""}, config)

        return runs
    if name == "get_tuple":
        saver = make()
        thread = lg.fresh("instr-read")
        lg.converse(lg.chat(saver), thread, 20)
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}

        def reads(n: int) -> None:
            for _ in range(n):
                saver.get_tuple(config)

        return reads
    if name == "store put":
        store = {"ours": lg.our_store, "theirs": lg.their_store}[side]()
        namespace = ("bench", lg.fresh("instr-store"))

        def puts(n: int) -> None:
            for _ in range(n):
                store.put(namespace, "v", {"step": 7})

        return puts
    raise SystemExit(f"unknown operation {name!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("operation")
    parser.add_argument("--side", choices=("ours", "theirs"), default="ours")
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--server", action="store_true")
    parser.add_argument("--calls", action="store_true")
    parser.add_argument("--top", type=int, default=0)
    args = parser.parse_args()
    env.create_database()
    env.setup_django()
    env.migrate()
    import psycopg

    from bench import langgraph_ops

    langgraph_ops.prepare()
    run = operation(args.operation, args.side)
    run(WARM)
    with psycopg.connect(env.dsn(), autocommit=True) as monitor:
        before = _server_cpu(monitor)
        profile = cProfile.Profile() if args.calls else None
        if profile:
            profile.enable()
        run(args.n)
        if profile:
            profile.disable()
        after = _server_cpu(monitor)
    per = 1 if args.operation == "turn" else args.n
    if args.server:
        spent = sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())
        print(
            f"server CPU: {spent * 1e6 / per:,.0f} µs per {'conversation' if per == 1 else 'call'}"
        )
    if profile:
        stats = pstats.Stats(profile)
        print(f"Python function calls: {stats.total_calls / per:,.1f}")
        if args.top:
            stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
