"""Time push and pop through the Python API at list lengths 10, 1,000 and 100,000.

The scale rule of context lists: the cost of push and pop must not grow with the
list's length; at 100,000 elements they must run within 1.5x of their cost
at 10. This script measures it on the configured database (PostgreSQL when
``DATABASE_URL`` is set, else the SQLite file of ``SQLITE_PATH``) and exits
non-zero when a ratio is over the limit.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/DB .venv/bin/python bench/push_pop.py
    SQLITE_PATH=var/bench.sqlite3 .venv/bin/python bench/push_pop.py

The database must be migrated (``manage.py migrate``). Each measurement
keeps the list at its length: OPS pushes, then OPS LIFO pops; OPS untimed
pushes, then OPS FIFO pops (taken from the head). The best of ROUNDS rounds
is reported, the usual way to keep scheduler noise out of a micro-benchmark.
"""

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
os.environ.setdefault("DJANGO_DEBUG", "0")  # DEBUG keeps every query in memory

import django

django.setup()

from django.db import connection

from agentstate.services import context

LENGTHS = (10, 1_000, 100_000)
LIMIT = 1.5


# Each call's time in the round being timed (``_best`` keeps the best round's).
_calls: list[float] = []


def _timed(call: Callable[[], object]) -> None:
    began = time.perf_counter()
    call()
    _calls.append(time.perf_counter() - began)


def _best(
    ops: int,
    rounds: int,
    prepare: Callable[[], None] | None,
    run: Callable[[], None],
    undo: Callable[[], None] | None,
) -> float:
    global best_calls
    best = float("inf")
    for _ in range(rounds):
        if prepare is not None:
            prepare()
        _calls.clear()
        start = time.perf_counter()
        run()
        took = time.perf_counter() - start
        if took < best:
            best, best_calls = took, list(_calls)
        if undo is not None:
            undo()
    return ops / best


best_calls: list[float] = []


def measure(length: int, ops: int, rounds: int) -> dict[str, float]:
    """Ops/s of push, LIFO pop and FIFO pop at ``length``; ``timed_measure`` also
    gives one call's p50 and p99."""
    return timed_measure(length, ops, rounds)[0]


def timed_measure(
    length: int, ops: int, rounds: int
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """``measure``'s rates, and each operation's ``p50_ms`` and ``p99_ms`` (its best
    round's calls)."""
    from array import array

    from bench.workers import percentiles

    scope, name = f"bench/push_pop/{uuid.uuid4()}", "list"
    context.put(scope, name, list(range(length)))

    def pushes() -> None:
        for i in range(ops):
            _timed(lambda i=i: context.push(scope, name, i))

    def pops(mode: str) -> Callable[[], None]:
        def run() -> None:
            for _ in range(ops):
                _timed(lambda: context.pop(scope, name, mode))

        return run

    rates, latencies = {}, {}
    try:
        for op, prepare, run, undo in (
            ("push", None, pushes, pops("LIFO")),
            ("pop LIFO", pushes, pops("LIFO"), None),
            ("pop FIFO", pushes, pops("FIFO"), None),
        ):
            rates[op] = _best(ops, rounds, prepare, run, undo)
            latencies[op] = percentiles(array("d", best_calls))
        return rates, latencies
    finally:
        context.delete_scope(scope)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ops", type=int, default=500, help="operations per timed run (default 500)"
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="timed runs per figure, best kept (default 5)"
    )
    args = parser.parse_args()

    print(
        f"database: {connection.vendor} ({connection.settings_dict['NAME']}); "
        f"{args.ops} operations per run, best of {args.rounds}"
    )
    results = {length: measure(length, args.ops, args.rounds) for length in LENGTHS}
    operations = list(results[LENGTHS[0]])
    print(f"{'length':>9} " + " ".join(f"{op + ' ops/s':>16}" for op in operations))
    for length, rates in results.items():
        print(f"{length:>9,} " + " ".join(f"{rates[op]:>16,.0f}" for op in operations))
    failed = False
    print(f"cost ratio 100k/10 (limit {LIMIT}x):")
    for op in operations:
        ratio = results[LENGTHS[0]][op] / results[LENGTHS[-1]][op]
        failed |= ratio > LIMIT
        print(f"  {op:<9} {ratio:.2f}x {'OK' if ratio <= LIMIT else 'OVER THE LIMIT'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
