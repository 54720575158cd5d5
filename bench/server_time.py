"""Where one call's time goes, in figures that do not move with the machine's load.

    .venv/bin/python bench/server_time.py [OPERATION ...] [--calls 2000]

For each operation of the Python-API section (``bench/api_ops.py``; none named:
every one, and the Django-cursor floors), ``--calls`` calls in this process on
one connection, after 50 untimed ones, and per call: the server's time inside
the functions (``pg_stat_user_functions``, ``track_functions = all`` for this
session: the outermost function's total time, and with ``--detail`` each
function's self time), the server process's CPU time (its ``/proc/<pid>/schedstat``: the
database on this machine), this process's CPU time (``getrusage``: the client's
Python, Django and psycopg), and the wall time; then, over up to 500 more calls,
the server's own time for the call's statements, parse and plan included
(``log_min_duration_statement = 0``, its messages sent to this client), which
the floors have too (they run no function). Commits do not wait for the WAL's
flush (``synchronous_commit = off`` in this session): that wait is the disk's,
one per call here and in the floors alike. PostgreSQL times a simple-protocol
statement (the floors') with its commit, an extended-protocol one (ours, prepared)
without it. An SQL function the planner
inlines is no function call: its time is only in the statements'. ``work()``
gives ``bench/run.py`` the same figures, with the rows each call writes, for
every operation and its floor.
"""

import argparse
import resource
import sys
import time
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import env


def _counters(cursor) -> tuple[dict[str, tuple[int, float, float]], int]:
    """This session's counters so far: each agentstate function's calls, total and self
    time (ms), and the rows its statements inserted, updated or deleted in any table."""
    cursor.execute("SELECT pg_stat_force_next_flush()")
    cursor.execute("SELECT 1")  # the flush happens at the end of a transaction
    cursor.execute("SELECT pg_stat_clear_snapshot()")
    cursor.execute(
        "SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions"
        " WHERE funcname LIKE 'agentstate%%'"
    )
    functions = {name: (calls, total, own) for name, calls, total, own in cursor.fetchall()}
    cursor.execute(
        "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables"
    )
    (rows,) = cursor.fetchone()
    return functions, int(rows)


def _statements(op, calls: int) -> float:
    """The server's time for the call's statements (parse, bind, execute: what
    ``log_min_duration_statement`` reports, sent to this client), per call."""
    from django.db import connection

    durations = []

    def noted(diagnostic) -> None:
        message = diagnostic.message_primary or ""
        if message.startswith("duration: "):
            durations.append(float(message.split()[1]))

    connection.ensure_connection()
    raw = connection.connection
    with connection.cursor() as cursor:
        cursor.execute("SET log_min_duration_statement = 0")
        cursor.execute("SET client_min_messages = log")
    raw.add_notice_handler(noted)
    try:
        done = _run(op, calls)
    finally:
        raw.remove_notice_handler(noted)
        with connection.cursor() as cursor:
            cursor.execute("RESET client_min_messages")
            cursor.execute("RESET log_min_duration_statement")
    return sum(durations) * 1000 / max(done, 1)


def _run(op, calls: int) -> int:
    """Run ``op`` ``calls`` times, or until its supply runs out (``StopIteration``):
    how many calls it made."""
    done = 0
    try:
        for _ in range(calls):
            op()
            done += 1
    except StopIteration:
        pass
    return done


def measure(op, calls: int, statements: bool = True) -> dict:
    """One call of ``op``'s figures over ``calls`` calls (after 50 untimed ones) on
    Django's connection, whose session settings are as they were after it
    (``statements``: also the statements' own time, over up to 500 more calls)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SET track_functions = 'all'")
        # a commit's flush is a wait on the disk, the same one for every call
        # here and for the floors: left out, so the figures are work done
        cursor.execute("SET synchronous_commit = off")
    try:
        return _measured(op, calls, statements)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET track_functions")
            cursor.execute("RESET synchronous_commit")


def _measured(op, calls: int, statements: bool) -> dict:
    from django.db import connection

    for _ in range(50):
        op()
    with connection.cursor() as cursor:
        before, rows_before = _counters(cursor)
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    server_cpu = cast(float, env.cpu_seconds(backend))
    began = time.perf_counter()
    done = _run(op, calls)
    wall = time.perf_counter() - began
    used = resource.getrusage(resource.RUSAGE_SELF)
    server_cpu = cast(float, env.cpu_seconds(backend)) - server_cpu
    with connection.cursor() as cursor:
        after, rows_after = _counters(cursor)
    statement_us = _statements(op, min(done, 500)) if statements else None
    per = {}
    for name, (n, total, own) in after.items():
        n0, total0, own0 = before.get(name, (0, 0.0, 0.0))
        if n > n0:
            per[name] = (
                (n - n0) / done,
                (total - total0) * 1000 / done,
                (own - own0) * 1000 / done,
            )
    # the outermost function: the largest total per call
    outer = max(per.values(), key=lambda v: v[1])[1] if per else None
    return {
        "calls": done,
        "server_us": outer,
        "statement_us": statement_us,
        "server_cpu_us": server_cpu * 1e6 / done,
        "client_cpu_us": (used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime) * 1e6 / done,
        "wall_us": wall * 1e6 / done,
        "rows_written": (rows_after - rows_before) / done,
        "functions": per,
    }


def work(calls: int) -> dict:
    """Each Python-API operation's call and its floor's (``Django UPDATE`` for a write,
    ``Django SELECT`` for a read) over ``calls`` calls on one connection: the server's
    CPU, the client's, the time inside the functions and the rows written, per call.
    What an operation under its goal does beyond the floor's one statement, measured
    in the run that printed the ratio (``bench/run.py``)."""
    from django.db import connection

    from bench import api_ops
    from bench.fill import analyze

    api_ops.prepare_baselines()
    operations = {
        **{k: v for k, v in api_ops.baseline_operations().items() if k.startswith("Django")},
        **api_ops.our_operations(calls + 100),
    }
    figures = {}
    for name, (kind, start) in operations.items():
        op = start(0)
        analyze()
        f = measure(op, calls, statements=False)
        figures[name] = {
            "kind": kind,
            **{key: round(f[key], 1) for key in ("server_cpu_us", "client_cpu_us", "wall_us")},
            "in_functions_us": None if f["server_us"] is None else round(f["server_us"], 1),
            "rows_written": round(f["rows_written"], 2),
        }
    connection.close()  # a new session for what runs next
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("operations", nargs="*")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--detail", action="store_true", help="each function's self time")
    args = parser.parse_args()
    env.create_database()
    env.setup_django()
    env.migrate()
    from bench import api_ops

    api_ops.prepare_baselines()
    operations = {
        **api_ops.our_operations(args.calls + 600),
        **{k: v for k, v in api_ops.baseline_operations().items() if k.startswith("Django")},
    }
    names = args.operations or list(operations)
    print(
        f"{'operation':28} {'in functions µs':>15} {'statements µs':>13} {'server CPU µs':>13}"
        f" {'client CPU µs':>13} {'wall µs':>8}"
    )
    for name in names:
        op = operations[name][1](0)
        from bench.fill import analyze

        analyze()
        figure = measure(op, args.calls)
        server = "" if figure["server_us"] is None else f"{figure['server_us']:.0f}"
        print(
            f"{name:28} {server:>15} {figure['statement_us']:13.0f}"
            f" {figure['server_cpu_us']:13.0f}"
            f" {figure['client_cpu_us']:13.0f} {figure['wall_us']:8.0f}",
            flush=True,
        )
        if args.detail:
            for function, (n, total, own) in sorted(
                figure["functions"].items(), key=lambda item: -item[1][2]
            ):
                print(f"    {function:36} {n:5.1f} calls  total {total:7.1f}  self {own:7.1f}")


if __name__ == "__main__":
    main()
