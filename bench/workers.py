"""Operations per second at N worker processes, each with its own connection.

A measured operation is a ``start(index)`` function: run in worker ``index``
before the start barrier, it prepares what the worker needs and returns the
operation, a callable run in a loop until the time is up (or until it raises
``StopIteration`` because its prepared supply ran out). Between the
preparations and the start, the database's statistics are brought up to date.
Each call is timed too: ``measured`` answers the rate with the median and
99th percentile of one call's time (milliseconds) over all workers' calls.
"""

import multiprocessing
import statistics
import time
from array import array
from collections.abc import Callable
from typing import Any

Op = Callable[[], Any]
Start = Callable[[int], Op]

_fork = multiprocessing.get_context("fork")


def _worker(start: Start, index: int, seconds: float, barrier, results) -> None:
    from django.db import connections

    connections.close_all()  # never share the parent's socket
    try:
        op = start(index)
        barrier.wait()  # every worker has made its rows
        if index == 0:
            from bench.fill import analyze

            analyze()
        barrier.wait()
        durations = array("d")
        clock = time.perf_counter
        began = now = clock()
        deadline = began + seconds
        try:
            while now < deadline:
                op()
                durations.append(clock() - now)
                now = clock()
        except StopIteration:
            pass
        results.put((len(durations) / (clock() - began), durations))
    except BaseException as error:
        barrier.abort()
        results.put(error)
        raise
    finally:
        connections.close_all()


def percentiles(durations: array) -> dict[str, float]:
    """The median and 99th percentile of call times in seconds, in milliseconds."""
    if len(durations) < 2:
        only = durations[0] * 1000 if durations else 0.0
        return {"p50_ms": round(only, 3), "p99_ms": round(only, 3)}
    cuts = statistics.quantiles(durations, n=100, method="inclusive")
    return {"p50_ms": round(cuts[49] * 1000, 3), "p99_ms": round(cuts[98] * 1000, 3)}


def rate(start: Start, workers: int, seconds: float) -> float:
    """Total operations per second of ``workers`` processes running ``start``'s op."""
    return measured(start, workers, seconds)["rate"]


def measured(start: Start, workers: int, seconds: float) -> dict[str, float]:
    """``rate`` (total operations per second of ``workers`` processes running
    ``start``'s op) with ``p50_ms`` and ``p99_ms``, one call's time."""
    from django.db import connections

    connections.close_all()
    barrier, results = _fork.Barrier(workers), _fork.Queue()
    processes = [
        _fork.Process(target=_worker, args=(start, i, seconds, barrier, results))
        for i in range(workers)
    ]
    for process in processes:
        process.start()
    answers = [results.get(timeout=seconds + 120) for _ in processes]
    for process in processes:
        process.join()
    failed = [r for r in answers if isinstance(r, BaseException)]
    if failed:
        raise RuntimeError(f"a worker failed: {failed[0]!r}")
    durations = array("d")
    for _rate, calls in answers:
        durations.extend(calls)
    return {"rate": sum(r for r, _calls in answers), **percentiles(durations)}


def supplied(func: Callable[..., Any], items) -> Op:
    """An operation over prepared items: each call is ``func(*next item)``."""
    iterator = iter(items)
    return lambda: func(*next(iterator))
