"""Operations per second at N worker processes, each with its own connection.

A measured operation is a ``start(index)`` function: run in worker ``index``
before the start barrier, it prepares what the worker needs and returns the
operation, a callable run in a loop until the time is up (or until it raises
``StopIteration`` because its prepared supply ran out). Between the
preparations and the start, the database's statistics are brought up to date.
"""

import multiprocessing
import time
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
        count, began = 0, time.perf_counter()
        deadline = began + seconds
        try:
            while time.perf_counter() < deadline:
                op()
                count += 1
        except StopIteration:
            pass
        results.put(count / (time.perf_counter() - began))
    except BaseException as error:
        barrier.abort()
        results.put(error)
        raise
    finally:
        connections.close_all()


def rate(start: Start, workers: int, seconds: float) -> float:
    """Total operations per second of ``workers`` processes running ``start``'s op."""
    from django.db import connections

    connections.close_all()
    barrier, results = _fork.Barrier(workers), _fork.Queue()
    processes = [
        _fork.Process(target=_worker, args=(start, i, seconds, barrier, results))
        for i in range(workers)
    ]
    for process in processes:
        process.start()
    rates = [results.get(timeout=seconds + 120) for _ in processes]
    for process in processes:
        process.join()
    failed = [r for r in rates if isinstance(r, BaseException)]
    if failed:
        raise RuntimeError(f"a worker failed: {failed[0]!r}")
    return sum(rates)


def supplied(func: Callable[..., Any], items) -> Op:
    """An operation over prepared items: each call is ``func(*next item)``."""
    iterator = iter(items)
    return lambda: func(*next(iterator))
