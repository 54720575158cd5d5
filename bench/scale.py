"""Figures that must not grow with size: push/pop by list length, the sweep by backlog."""

import multiprocessing
import resource
import time

from django.db import connection, connections

from agentstate.services.sweep import sweep
from bench import fill
from bench.api_ops import TAG


def push_pop(ops: int, rounds: int) -> dict[str, dict[str, float]]:
    """bench/push_pop.py's figures: ops/s of push, LIFO and FIFO pop by list length."""
    from bench import push_pop

    return {str(length): push_pop.measure(length, ops, rounds) for length in push_pop.LENGTHS}


def _rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() // 1024


def _timed_sweep(results) -> None:
    connections.close_all()
    before = _rss_kib()
    began = time.perf_counter()
    result = sweep()
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    results.put(
        {"expired": result.expired_pauses, "seconds": seconds, "peak_mib": (peak - before) / 1024}
    )
    connections.close_all()


def expiry_sweep(rows: int) -> dict[str, float]:
    """Sweep ``rows`` expired pauses in a fresh process: its time and peak memory growth."""
    began = time.perf_counter()
    fill.pauses(f"{TAG}-sweep-{rows}", rows, expired=True)
    fill.analyze()
    filled = time.perf_counter() - began
    connections.close_all()
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    process = fork.Process(target=_timed_sweep, args=(results,))
    process.start()
    figures = results.get()
    process.join()
    if figures["expired"] != rows:
        raise RuntimeError(f"the sweep expired {figures['expired']} pauses, not {rows}")
    with connection.cursor() as cursor:  # leave the tables small for the next figure
        cursor.execute("TRUNCATE agentstate_pausedrun, agentstate_event")
    return {**figures, "fill_seconds": filled}
