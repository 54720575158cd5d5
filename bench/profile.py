"""Where one operation's time goes: pyinstrument over a loop of it, in this process.

    .venv/bin/python bench/profile.py put [--seconds 3]

The operations are the Python-API section's (``bench/run.py``), on the same
database; also counts the SQL statements of one call.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("operation")
    parser.add_argument("--seconds", type=float, default=3)
    args = parser.parse_args()
    env.create_database()
    env.setup_django()
    env.migrate()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from pyinstrument import Profiler

    from bench import api_ops

    operations = {
        **api_ops.our_operations(int(args.seconds * 5000)),
        **api_ops.baseline_operations(),
    }
    api_ops.prepare_baselines()
    op = operations[args.operation][1](0)
    op()
    with CaptureQueriesContext(connection) as queries:
        op()
    print(f"{len(queries)} statements per call:")
    for query in queries:
        print("   ", query["sql"][:160])
    count, profiler = 0, Profiler(interval=0.0002)
    deadline = time.perf_counter() + args.seconds
    with profiler:
        while time.perf_counter() < deadline:
            op()
            count += 1
    print(f"{count / args.seconds:,.0f} ops/s under the profiler")
    print(profiler.output_text(unicode=True, show_all=False))


if __name__ == "__main__":
    main()
