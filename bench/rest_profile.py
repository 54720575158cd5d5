"""Where one REST request's Python goes: deterministic counts per endpoint, in this process.

    .venv/bin/python bench/rest_profile.py                  # every endpoint: statements, calls
    .venv/bin/python bench/rest_profile.py "GET pauses"     # and cProfile's top of that one
    .venv/bin/python bench/rest_profile.py --time 300 --only "GET pauses (page of 20)"

Each endpoint of the REST section (``bench.web``) and its two baselines is
requested through Django's WSGI handler with the site's middleware (as
gunicorn calls it), after an untimed first request. Printed per request: the
SQL statements (``CaptureQueriesContext``) and the Python function calls
(``cProfile``), each also over the DRF floor's of its kind. Unlike a rate on
a shared machine, both counts are the same from run to run. ``--time N``
adds this process's CPU time per request (the client side of the database
included, the server's not), the best of batches of 20 requests taken in turns
with the floor's, which follows the load far less than a mean.
"""

import sys
from pathlib import Path

# This folder's profile.py would stand for the standard library's, which cProfile imports.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import cProfile
import dataclasses
import io
import json
import pstats
import time

from bench import env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("endpoint", nargs="?", help="print the profile of this endpoint")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--sort", default="cumulative", help="cProfile's order (calls, tottime...)")
    parser.add_argument(
        "--time",
        type=int,
        default=0,
        metavar="N",
        help="also this process's CPU time per request: N requests in batches of 20, the best",
    )
    parser.add_argument("--only", action="append", help="measure only these endpoints")
    parser.add_argument(
        "--page-of-1",
        action="store_true",
        help="also each page of 20 as a page of 1: the difference is 19 rows' cost",
    )
    args = parser.parse_args()
    callers, tokens = env.rest_site()
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connection
    from django.test.client import RequestFactory
    from django.test.utils import CaptureQueriesContext

    from bench import web

    measured = web.endpoints(8, callers["owner"][0])
    if args.page_of_1:
        measured += [
            dataclasses.replace(
                e,
                name=e.name.replace("20", "1"),
                paths=[p.replace("page_size=20", "page_size=1") for p in e.paths],
            )
            for e in measured
            if "page_size=20" in e.paths[0]
        ]
    if args.only:
        measured = [e for e in measured if e.name in args.only]
    handler = WSGIHandler()
    factory = RequestFactory()

    def environ(endpoint: web.Endpoint, n: int) -> dict:
        paths, bodies = endpoint.paths, endpoint.bodies
        body = json.dumps(bodies[n % len(bodies)]) if bodies else ""
        request = factory.generic(
            endpoint.method,
            paths[n % len(paths)],
            body,
            content_type="application/json",
            headers={"authorization": f"Token {tokens[endpoint.caller]}"},
        )
        return request.environ

    def call(endpoint: web.Endpoint, n: int) -> int:
        status: list[str] = []
        response = handler(environ(endpoint, n), lambda s, h, *a: status.append(s))
        b"".join(response)
        response.close()
        return int(status[0].split()[0])

    rows = []
    baselines = {
        **{f"floor {k}": e for k, e in web.DRF.items()},
        **{f"bare {k}": e for k, e in web.BARE.items()},
    }
    for endpoint in [*baselines.values(), *measured]:
        call(endpoint, 0)  # first-request lookups
        with CaptureQueriesContext(connection) as queries:
            profiler = cProfile.Profile()
            profiler.enable()
            status = call(endpoint, 1)
            profiler.disable()
        stats = pstats.Stats(profiler)
        rows.append([endpoint, status, len(queries), stats.total_calls, stats, 0.0])
    # Timed in turns, each endpoint a batch of 20 requests a turn, the best turn kept:
    # what other jobs on the machine take shows as slower turns, not a slower best.
    for _ in range(max(1, args.time // 20)):
        for row in rows if args.time else []:
            start = time.process_time()
            for n in range(20):
                call(row[0], n)
            taken = (time.process_time() - start) / 20 * 1000
            row[5] = min(row[5] or taken, taken)
    floor = {row[0].kind: row[3] for row in rows if row[0] in web.DRF.values()}
    floor_ms = {row[0].kind: row[5] for row in rows if row[0] in web.DRF.values()}
    timed = f"{'ms':>7}{'/ floor':>9}" if args.time else ""
    print(f"{'endpoint':<36}{'status':>7}{'SQL':>5}{'calls':>8}{'/ floor':>9}{timed}")
    for endpoint, status, statements, calls, stats, cpu in rows:
        timed = f"{cpu:>7.2f}{cpu / floor_ms[endpoint.kind]:>9.2f}" if args.time else ""
        print(
            f"{endpoint.name:<36}{status:>7}{statements:>5}{calls:>8}"
            f"{calls / floor[endpoint.kind]:>9.2f}{timed}"
        )
        if args.endpoint and endpoint.name == args.endpoint:
            out = io.StringIO()
            stats.stream = out
            stats.sort_stats(args.sort).print_stats(args.top)
            shown = out.getvalue()
    if args.endpoint:
        print(shown)


if __name__ == "__main__":
    main()
