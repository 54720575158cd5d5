"""Figures that must not grow with size: push/pop by list length, the sweep by backlog."""

import multiprocessing
import resource
import time
from collections.abc import Callable

from django.db import connection, connections

from agentstate.services.sweep import sweep
from bench import env, fill
from bench.api_ops import TAG


def push_pop(ops: int, rounds: int) -> tuple[dict, dict]:
    """bench/push_pop.py's figures by list length: ops/s of push, LIFO and FIFO pop,
    and each one's call p50 and p99."""
    from bench import push_pop

    measured = {str(n): push_pop.timed_measure(n, ops, rounds) for n in push_pop.LENGTHS}
    return (
        {n: rates for n, (rates, _latency) in measured.items()},
        {n: latency for n, (_rates, latency) in measured.items()},
    )


def _rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() // 1024


def _timed_sweep(results) -> None:
    from array import array

    from bench.workers import percentiles

    connections.close_all()
    before = _rss_kib()
    with connection.cursor() as cursor:  # the connection the sweep goes on
        cursor.execute("SELECT pg_backend_pid()")
        (server_pid,) = cursor.fetchone()
    server_before, client_before = env.cpu_seconds(server_pid), time.process_time()
    batches, last = array("d"), [time.perf_counter()]

    def batch_done(label: str, total: int) -> None:
        now = time.perf_counter()
        batches.append(now - last[0])
        last[0] = now

    began = last[0]
    result = sweep(progress=batch_done)
    seconds = time.perf_counter() - began
    client_cpu, server_after = time.process_time() - client_before, env.cpu_seconds(server_pid)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    results.put(
        {
            **result.as_dict(),
            "seconds": seconds,
            "client_cpu_seconds": client_cpu,
            "server_cpu_seconds": None
            if server_before is None or server_after is None
            else server_after - server_before,
            "peak_mib": (peak - before) / 1024,
            **{f"batch_{key}": value for key, value in percentiles(batches).items()},
        }
    )
    connections.close_all()


def _in_fresh_process() -> dict:
    """``sweep()`` in a forked process (its peak memory its own): the counts and figures."""
    connections.close_all()
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    process = fork.Process(target=_timed_sweep, args=(results,))
    process.start()
    figures = results.get()
    process.join()
    return figures


def _figures(figures: dict, filled: float) -> dict[str, float]:
    """A sweep's figures: its time, CPU time (the process's and its database server
    process's: what the machine's load moves little), peak memory growth and batches', and
    the fill's time."""
    kept = (
        "seconds",
        "client_cpu_seconds",
        "server_cpu_seconds",
        "peak_mib",
        "batch_p50_ms",
        "batch_p99_ms",
    )
    return {**{key: figures[key] for key in kept}, "fill_seconds": filled}


def _settled() -> None:
    """After a fill: ANALYZE, and a CHECKPOINT, as the checkpointer would soon after.
    Without it a sweep small enough to end before the next checkpoint changes pages the
    fill dirtied and writes no full-page image to the WAL, which a larger sweep does
    for each page it first changes after each checkpoint it meets (100,000 pauses:
    1,243 bytes of WAL a row against 1,593 at a million): the two would not weigh the
    same work."""
    fill.analyze()
    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")


def _swept(rows: int, counted: str, made: Callable[[], None]) -> dict[str, float]:
    """``made()`` (the rows to sweep), settled, then swept in a fresh process: the
    sweep's figures and the fill's time, once the sweep counted ``rows`` as
    ``counted`` (a ``SweepResult`` field)."""
    began = time.perf_counter()
    made()
    _settled()
    filled = time.perf_counter() - began
    figures = _in_fresh_process()
    if figures[counted] != rows:
        raise RuntimeError(f"the sweep counted {figures[counted]} {counted}, not {rows}")
    return _figures(figures, filled)


def expiry_sweep(rows: int) -> dict[str, float]:
    """Sweep ``rows`` expired pauses in a fresh process: its time and peak memory growth."""
    figures = _swept(
        rows, "expired_pauses", lambda: fill.pauses(f"{TAG}-sweep-{rows}", rows, expired=True)
    )
    with connection.cursor() as cursor:  # leave the tables small for the next figure
        cursor.execute("TRUNCATE agentstate_pausedrun, agentstate_event CASCADE")
    return figures


def store_sweep(rows: int) -> dict[str, float]:
    """Sweep ``rows`` LangGraph store items past their TTL, among as many that are not,
    in 100 namespaces, in a fresh process: its time and peak memory growth (a batch
    finds its items by reading the store's items from where the last ended)."""
    from agentstate.types import STORE_PREFIX

    namespaces = f"{STORE_PREFIX}{TAG}-sweep-{rows}-"

    def made() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO agentstate_scope (key, created_at)"
                " SELECT %s || n, now() FROM generate_series(1, 100) AS n",
                [namespaces],
            )
            cursor.execute(
                "INSERT INTO agentstate_variable (scope_id, name, is_list, value, head, tail,"
                " version, updated_at, updated_by)"
                " SELECT s.id, 'item-' || i, false, jsonb_build_object('value',"
                " jsonb_build_object('step', i), 'expires_at', CASE WHEN i %% 2 = 0 THEN 1.0"
                " ELSE 9e12 END), 0, 0, 1, now(), 'bench'"
                " FROM agentstate_scope s, generate_series(1, %s) AS i"
                " WHERE starts_with(s.key, %s)",
                [2 * rows // 100, namespaces],
            )

    figures = _swept(rows, "purged_store_items", made)
    with connection.cursor() as cursor:  # leave the tables as they were for the next figure
        cursor.execute(
            "DELETE FROM agentstate_variable WHERE scope_id IN"
            " (SELECT id FROM agentstate_scope WHERE starts_with(key, %s))",
            [namespaces],
        )
        cursor.execute("DELETE FROM agentstate_scope WHERE starts_with(key, %s)", [namespaces])
    return figures


def retention_sweep(rows: int) -> dict[str, float]:
    """Sweep ``rows`` events past ``EVENT_RETENTION`` in a fresh process: time and peak
    memory growth (the deletion goes in batches, so memory stays flat)."""

    def made() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO agentstate_event (kind, actor, object_type, object_id, owner,"
                " details, created_at) SELECT 'context.put', 'bench', 'variable', 'old/' || i,"
                " '', '{\"version\": 1}'::jsonb, now() - interval '400 days'"
                " FROM generate_series(1, %s) AS i",
                [rows],
            )

    return _swept(rows, "purged_events", made)
