"""One operation's instructions in the client process, under callgrind: the path of
a database function's call (``agentstate.db``) measured against Django's floor.

    .venv/bin/python bench/call_instr.py OPERATION --n N
    valgrind --tool=callgrind --callgrind-out-file=/tmp/x \\
        .venv/bin/python bench/call_instr.py "context get" --n 400

Operations: ``bench/api_ops.py``'s (``get``: a context get, ``put``, ``claim``...),
``saver put`` (``bench/langgraph_ops.py``'s, with the benchmark's making of the
checkpoint), ``Django SELECT`` (Django's own cursor loop of one SELECT, the
floor). Each first runs a few times unmeasured (the connection opened, the
plans made); the instructions of two runs of different ``--n``, differenced
and divided, are one operation's.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse

from bench import env

WARM = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("operation")
    parser.add_argument("--n", type=int, default=100)
    args = parser.parse_args()
    env.create_database()
    env.setup_django()
    env.migrate()
    from bench import api_ops, langgraph_ops

    if args.operation == "saver put":
        op = langgraph_ops._saver_put(langgraph_ops.our_saver)(0)
    elif args.operation == "Django SELECT":
        api_ops.prepare_baselines()
        op = dict(api_ops.baseline_operations())[args.operation][1](0)
    else:
        op = api_ops.our_operations(args.n + WARM)[args.operation][1](0)
    for _ in range(WARM):
        op()
    for _ in range(args.n):
        op()


if __name__ == "__main__":
    main()
