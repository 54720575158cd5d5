"""CPU time per REST request, by process: gunicorn's workers and PostgreSQL's backends.

    .venv/bin/python bench/rest_cpu.py "GET pauses (page of 20)" [--seconds 5] [--rounds 3]

The REST section's site under gunicorn (``bench.web.Server``) is loaded by wrk
with the section's script, alternating the named endpoints with the DRF floor
of their kind, ``--rounds`` times. Each load's figure is the CPU time
(``env.cpu_seconds``: the scheduler's count) the server's workers and the
database's backends of this database spent, over the requests wrk completed
(wrk's own is left out). Unlike a rate on a shared machine, these move far
less with the load of other jobs (caches shared with them still do). It runs on the database as the last run left it (no fill beyond
the section's own objects); ``--no-fill`` skips those too, for a database a
``bench/run.py`` has already filled.
"""

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import env


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _backends() -> list[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return [pid for (pid,) in cursor.fetchall()]


def _cpu(pids: list[int]) -> float:
    return sum(env.cpu_seconds(pid) or 0.0 for pid in pids)


def load(base: str, endpoint, token: str, seconds: float, server_pid: int) -> dict:
    """One wrk load of ``endpoint``: requests, and CPU ms per request by process."""
    from bench import web

    workers = _children(server_pid)
    backends = _backends()
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        script.write(web.lua_script(endpoint, token))
        script.flush()
        wrk = subprocess.Popen(
            [
                "wrk",
                "-t1",
                f"-c{web.CONNECTIONS}",
                f"-d{max(1, round(seconds))}s",
                "-s",
                script.name,
                base,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        before = (_cpu(workers), _cpu(backends))
        out, _ = wrk.communicate()
    after = (_cpu(workers), _cpu(backends))
    done = int(re.search(r"(\d+) requests in", out).group(1))
    failed = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "requests": done,
        "failed": int(failed.group(1)) if failed else 0,
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "gunicorn_ms": 1000 * (after[0] - before[0]) / done,
        "postgres_ms": 1000 * (after[1] - before[1]) / done,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("endpoints", nargs="+")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-fill", action="store_true")
    args = parser.parse_args()
    callers, tokens = env.rest_site()
    from bench import web

    if args.no_fill:
        by_name = {e.name: e for e in _unfilled_endpoints()}
    else:
        by_name = {e.name: e for e in web.endpoints(8, callers["owner"][0])}
    chosen = [by_name[name] for name in args.endpoints]
    server = web.Server()
    with server as base:
        pid = server.process.pid
        for endpoint in (web.DRF["read"], *chosen):
            web.wrk(base, endpoint, tokens[endpoint.caller], 1)  # warm up
        print(f"{'endpoint':<40}{'req/s':>8}{'gunicorn ms':>13}{'postgres ms':>13}{'sum':>8}")
        for _ in range(args.rounds):
            for endpoint in (
                *{web.DRF[e.kind].name: web.DRF[e.kind] for e in chosen}.values(),
                *chosen,
            ):
                f = load(base, endpoint, tokens[endpoint.caller], args.seconds, pid)
                flag = f" FAILED {f['failed']}" if f["failed"] else ""
                print(
                    f"{endpoint.name:<40}{f['rps']:>8.0f}{f['gunicorn_ms']:>13.3f}"
                    f"{f['postgres_ms']:>13.3f}{f['gunicorn_ms'] + f['postgres_ms']:>8.3f}{flag}",
                    flush=True,
                )


def _unfilled_endpoints():
    from bench import web

    return [
        web.Endpoint("GET pauses (page of 20)", "read", "GET", ["/api/pauses/?page_size=20"]),
        web.Endpoint("GET events (page of 20)", "read", "GET", ["/api/events/?page_size=20"]),
        web.Endpoint(
            "GET approval requests (page of 20)",
            "read",
            "GET",
            ["/api/approval-requests/?status=pending&page_size=20"],
        ),
    ]


if __name__ == "__main__":
    main()
