"""A fan-out's writes: T tasks each writing once to one checkpoint, ours and
LangGraph's ``PostgresSaver`` on the benchmark's database.

    .venv/bin/python bench/fanout.py [--tasks 100,1000,3000] [--size 1000]

For each T and side: one checkpoint put, then T calls of ``put_writes`` (a task's
one write of ``--size`` bytes of random hex), timed; the WAL they wrote
(``pg_current_wal_lsn()`` before and after); one read of the checkpoint with its
T pending writes.
"""

import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import os
import time

from bench import env


def wal(conn, since=None):
    if since is None:
        return conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    return float(
        conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", [since]).fetchone()[0]
    )


def fan_out(make, tasks: int, size: int) -> tuple[float, float, float]:
    """Seconds for the writes, bytes of WAL, seconds for the read."""
    import psycopg

    from bench import langgraph_ops as lg

    saver = make()
    config = {"configurable": {"thread_id": lg.fresh("fan-out"), "checkpoint_ns": ""}}
    checkpoint, metadata, versions = lg._checkpoint(1)
    config = saver.put(config, checkpoint, metadata, versions)
    values = [os.urandom(size // 2).hex() for _ in range(tasks)]
    with psycopg.connect(env.dsn(), autocommit=True) as conn:
        since = wal(conn)
        started = time.perf_counter()
        for n, value in enumerate(values):
            saver.put_writes(config, [("results", value)], f"task-{n:05}")
        writes = time.perf_counter() - started
        written = wal(conn, since)
    started = time.perf_counter()
    found = saver.get_tuple(config)
    read = time.perf_counter() - started
    assert len(found.pending_writes) == tasks, len(found.pending_writes)
    return writes, written, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="100,1000,3000")
    parser.add_argument("--size", type=int, default=1000)
    args = parser.parse_args()
    env.create_database()
    env.setup_django()
    env.migrate()
    from bench import langgraph_ops as lg

    lg.prepare()
    for tasks in (int(t) for t in args.tasks.split(",")):
        for side, make in (("ours", lg.our_saver), ("theirs", lg.their_saver)):
            writes, written, read = fan_out(make, tasks, args.size)
            print(
                f"{tasks:>6,} writes of {args.size:,} bytes, {side:<6}: {writes * 1000:8.0f} ms "
                f"({writes / tasks * 1e6:5.0f} µs a call), WAL {written / 1e6:6.1f} MB, "
                f"read {read * 1000:5.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
