"""Per-request costs of REST endpoints that do not depend on the machine's load.

    .venv/bin/python bench/rest_instr.py prepare [--supply 3000]
    .venv/bin/python bench/rest_instr.py run "POST decide (service)" --n 50 [--calls] [--server]
    valgrind --tool=callgrind --callgrind-out-file=/tmp/x \\
        .venv/bin/python bench/rest_instr.py run "POST decide (service)" --n 20

``prepare`` makes the REST section's objects (``bench.web.endpoints``) once and
keeps the endpoints (paths, bodies, callers' tokens) in ``STATE``; each ``run``
then takes the next unused requests of the endpoint (a filing's call, a
decision's request, a claim's pause are used once), sends a few untimed ones,
then ``--n`` through Django's WSGI handler with the site's middleware (as
gunicorn calls it). Per request it prints this process's CPU (``client_us``) and, as asked: the Python function calls
(``--calls``: cProfile), and the CPU the database's backend of this process
spent (``--server``: ``/proc/<pid>/schedstat``, the statement's work and its
commit). Under callgrind, the instructions of two runs of different ``--n``,
differenced, are one request's in this process.
"""

import sys
from pathlib import Path

# This folder's profile.py would stand for the standard library's, which cProfile imports.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import cProfile
import hashlib
import json
import pstats
import time

from bench import env

# One per database, so that runs on other databases at once keep their own.
STATE = Path(f"/tmp/agentstate_rest_instr_{env.db_name()}.json")
WARM = 5


def prepare(supply: int) -> None:
    callers, tokens = env.rest_site()
    from bench import web

    measured = web.endpoints(supply, callers["owner"][0])
    state = {
        "tokens": tokens,
        "endpoints": {
            e.name: {
                "method": e.method,
                "paths": e.paths,
                "bodies": e.bodies,
                "caller": e.caller,
                "webhook": e.webhook,
                "once": len(e.paths) > web.SPREAD or len(e.bodies) > web.SPREAD,
            }
            for e in [*web.DRF.values(), *measured]
        },
    }
    STATE.write_text(json.dumps(state))
    for old in STATE.parent.glob(STATE.stem + ".*.used"):
        old.unlink()


def run(name: str, n: int, calls: bool, server: bool, top: int = 0, sort: str = "tottime") -> None:
    state = json.loads(STATE.read_text())
    endpoint = state["endpoints"][name]
    # How many of its requests were used, in a file of its own (runs of other endpoints
    # may go on at once).
    used = STATE.with_suffix(f".{hashlib.sha1(name.encode()).hexdigest()[:8]}.used")
    start = int(used.read_text()) if used.exists() else 0
    if endpoint["once"]:
        used.write_text(str(start + WARM + n))
    env.setup_django("bench.site_settings")
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connection
    from django.test.client import RequestFactory

    from bench.api_ops import subscribed

    subscribed(endpoint["webhook"])
    handler = WSGIHandler()
    factory = RequestFactory()
    token = state["tokens"][endpoint["caller"]]
    paths, bodies = endpoint["paths"], endpoint["bodies"]

    def call(k: int) -> int:
        body = json.dumps(bodies[k % len(bodies)]) if bodies else ""
        request = factory.generic(
            endpoint["method"],
            paths[k % len(paths)],
            body,
            content_type="application/json",
            headers={"authorization": f"Token {token}"},
        )
        status: list[str] = []
        response = handler(request.environ, lambda s, h, *a: status.append(s))
        b"".join(response)
        response.close()
        return int(status[0].split()[0])

    for k in range(start, start + WARM):
        code = call(k)
        if code >= 300:
            sys.exit(f"{name}: {code}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    profiler = cProfile.Profile() if calls else None
    before = env.cpu_seconds(pid)
    started = time.process_time()
    if profiler:
        profiler.enable()
    bad = 0
    for k in range(start + WARM, start + WARM + n):
        bad += call(k) >= 300
    if profiler:
        profiler.disable()
    after = env.cpu_seconds(pid)
    client = time.process_time() - started
    figures = {"endpoint": name, "n": n, "failed": bad, "client_us": client / n * 1e6}
    if profiler:
        stats = pstats.Stats(profiler)
        figures["calls"] = stats.total_calls / n
        if top:
            stats.sort_stats(sort).print_stats(top)
    if server:
        figures["server_us"] = (after - before) / n * 1e6
    print(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--supply", type=int, default=3000)
    r = sub.add_parser("run")
    r.add_argument("endpoint")
    r.add_argument("--n", type=int, default=20)
    r.add_argument("--calls", action="store_true")
    r.add_argument("--server", action="store_true")
    r.add_argument("--top", type=int, default=0, help="with --calls: print cProfile's top")
    r.add_argument("--sort", default="tottime", help="cProfile's order for --top")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.supply)
    else:
        run(args.endpoint, args.n, args.calls, args.server, args.top, args.sort)


if __name__ == "__main__":
    main()
