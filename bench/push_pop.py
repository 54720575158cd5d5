"""Time push and pop through the Python API at list lengths 10, 1,000 and 100,000.

docs/concepts.md ("Scale"): the cost of push and pop must not grow with the
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


def best_rate(ops: int, rounds: int, prepare: Callable[[], None], run: Callable[[], None]) -> float:
    """Operations per second of ``run`` (``ops`` operations), best of ``rounds``."""
    best = float("inf")
    for _ in range(rounds):
        prepare()
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return ops / best


def measure(length: int, ops: int, rounds: int) -> dict[str, float]:
    scope, name = f"bench/push_pop/{uuid.uuid4()}", "list"
    context.put(scope, name, list(range(length)))

    def pushes() -> None:
        for i in range(ops):
            context.push(scope, name, i)

    def pops(mode: str) -> Callable[[], None]:
        def run() -> None:
            for _ in range(ops):
                context.pop(scope, name, mode)

        return run

    try:
        return {
            "push": _push_then_pop(ops, rounds, pushes, pops("LIFO")),
            "pop LIFO": best_rate(ops, rounds, pushes, pops("LIFO")),
            "pop FIFO": best_rate(ops, rounds, pushes, pops("FIFO")),
        }
    finally:
        context.delete_scope(scope)


def _push_then_pop(
    ops: int, rounds: int, pushes: Callable[[], None], undo: Callable[[], None]
) -> float:
    """Push rate, each round's pushes undone (untimed) so the length stays put."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        pushes()
        best = min(best, time.perf_counter() - start)
        undo()
    return ops / best


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
