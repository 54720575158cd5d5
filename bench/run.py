"""The speed benchmark: every figure a ratio to a baseline measured in this run.

    .venv/bin/python bench/run.py            # the full run (about ten minutes on 2 cores)
    .venv/bin/python bench/run.py --quick    # shorter measurements, smaller sweep
    .venv/bin/python bench/run.py --sweep-only    # the sweeps alone (with --quick: smaller)

The goals (``GOALS``): every Python-API operation at least 0.8 of a loop doing
one single-row UPDATE (writes) or one SELECT by key (reads) through Django's
``connection.cursor()`` in autocommit, with the plain psycopg loop and
pgbench beside it as the limits; put and get more than 1.0 of LangGraph's
``PostgresStore``; every REST endpoint at least 0.9 of a bare DRF view
authenticated by DRF's ``TokenAuthentication`` doing one UPDATE or SELECT,
with a bare Django view beside it as the limit, and no failed responses;
push and pop at the longest list within 1.5x of their cost at the shortest;
filing an approval request with a webhook within 1.1x of it without one, and
add_usage under a run's and a user's budget within 1.2x of it without any;
the Agents SDK session (``bench/sessions.py``) faster than the SDK's SQLAlchemySession.
The round trips are counted too (``TRIPS``): one per operation, and per
request the token lookup and the operation. Beside the Python API's ratios, one
call's work against its floor's (``bench/server_time.py``'s ``work``): where an
operation is under its goal, what its one statement does beyond one UPDATE.

PostgreSQL from ``DATABASE_URL`` (default: a database ``agentstate_bench`` on
127.0.0.1 that is created and migrated; its name must contain ``bench``, as
it is emptied first). Prints the tables and writes
``bench/results/<time>.json``, ``.md`` (the tables in Markdown) and ``.png``.
"""

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import env

WORKERS = (1, 8)
# Each figure over its baseline: the Python API over the Django-cursor loop, ours over
# LangGraph's store (more than the goal), REST over the bare DRF view; push/pop's cost at
# the longest list over the shortest's (at most the goal); filing an approval request with a
# webhook's outbox row over the same call without one, and add_usage under a run's and a
# user's budget over the same call without any (at most the goal).
GOALS = {"api": 0.8, "peer": 1.0, "http": 0.9, "scale": 1.5, "outbox": 1.1, "budget": 1.2}
LOWER_IS_BETTER = ("scale", "outbox", "budget")
# Round trips: one per operation on PostgreSQL; the token lookup and the operation per request.
TRIPS = {"api": 1, "http": 2}
RATE_CEILING = 5000  # operations per second per core that a supply must outlast


def machine() -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        (pg,) = cursor.fetchone()
    with open("/proc/cpuinfo") as cpuinfo:
        cpu = next(
            (line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")),
            platform.processor(),
        )
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": round(ram, 1),
        "postgresql": pg,
        "python": platform.python_version(),
    }


def python_api(seconds: float) -> dict:
    """Each operation's rate beside its baselines', measured just before it (the machine
    drifts): the plain psycopg loop, then the Django-cursor loop, then the operation."""
    from bench import api_ops
    from bench.workers import measured, rate

    api_ops.prepare_baselines()
    baselines = api_ops.baseline_operations()
    figures: dict = {}
    for workers in WORKERS:
        supply = int(seconds * RATE_CEILING / min(workers, os.cpu_count() or 1))
        figures[str(workers)] = ops = {}
        for name, (kind, start) in api_ops.our_operations(supply).items():
            statement = "UPDATE" if kind == "write" else "SELECT"
            psycopg = rate(baselines[f"psycopg {statement}"][1], workers, seconds)
            floor = measured(baselines[f"Django {statement}"][1], workers, seconds)
            ours = measured(start, workers, seconds)
            ops[name] = {
                "kind": kind,
                "psycopg": round(psycopg, 1),
                "django": round(floor["rate"], 1),
                "django_p50": floor["p50_ms"],
                "django_p99": floor["p99_ms"],
                "ops": round(ours["rate"], 1),
                "p50": ours["p50_ms"],
                "p99": ours["p99_ms"],
            }
            if f"LangGraph {name}" in baselines:
                peer = baselines[f"LangGraph {name}"][1]
                ops[name]["langgraph"] = round(rate(peer, workers, seconds), 1)
        print(f"  {workers} worker(s): done", flush=True)
    return figures


def api_counts() -> dict:
    from bench import api_ops

    return api_ops.statements()


def api_work(quick: bool) -> dict:
    """One call's work beside its floor's, per operation (``bench/server_time.py``)."""
    from bench import server_time

    return server_time.work(500 if quick else 2000)


# Each Python-API operation's floor by its kind.
FLOORS = {"write": "Django UPDATE", "read": "Django SELECT"}


def work_rows(results: dict) -> list[tuple[str, str, dict, dict]]:
    """The one-call table's rows: each operation (the floors first) with its ratios at
    1 and 8 workers (empty for a floor), its figures and its floor's."""
    work, r = results.get("api_work"), results["ratios"]["api"]
    if not work:
        return []
    rows = []
    for name, f in work.items():
        floor = work[FLOORS[f["kind"]]] if name in r["1"] else f
        ratios = (
            " / ".join(f"{r[w][name]:.2f}" for w in ("1", "8")) if name in r["1"] else "(floor)"
        )
        rows.append((name, ratios, f, floor))
    return rows


def work_cells(f: dict, floor: dict) -> list[str]:
    """A row's figures: the server's and the client's CPU per call (with their
    multiple of the floor's), the floor's CPU over the call's, the time inside the
    functions and the rows written."""

    def times(key: str) -> str:
        shown = f"{f[key]:,.0f}"
        return shown if f is floor else f"{shown} ({f[key] / floor[key]:.1f}x)"

    inside = "" if f["in_functions_us"] is None else f"{f['in_functions_us']:,.0f}"
    cpu = sum(f[key] for key in ("server_cpu_us", "client_cpu_us"))
    bound = sum(floor[key] for key in ("server_cpu_us", "client_cpu_us")) / cpu
    return [
        times("server_cpu_us"),
        times("client_cpu_us"),
        "" if f is floor else f"{bound:.2f}",
        inside,
        f"{f['rows_written']:g}",
    ]


WORK_HEADINGS = (
    "server CPU µs",
    "client CPU µs",
    "floor's CPU / its",
    "in functions µs",
    "rows written",
)
WORK_NOTE = (
    "One call's work, on one connection with `synchronous_commit` off (the commit's"
    " flush, the same wait for every write, left out): the database server's CPU"
    " and this process's (the client's Python, Django and psycopg) per call, each"
    " beside its multiple of its floor's (the Django-cursor loop of its kind); the"
    " floor's CPU (both sides) over the call's, the most its ratio can be where the"
    " cores are the limit (8 workers on a few cores); the server's time inside"
    " agentstate's functions; and the rows the call inserted, updated or deleted"
    " (its own, its events', its deliveries'), against the floor's one. An operation"
    " under its goal does that much more in its one statement than the floor's"
    " UPDATE or SELECT."
)


def pgbench(seconds: float) -> dict:
    from bench import pgbench

    pgbench.initialise()
    return {
        str(workers): {
            script: round(pgbench.tps(script, workers, seconds), 1)
            for script in ("update", "select-only")
        }
        for workers in WORKERS
    }


def ratios(results: dict) -> dict:
    """Each figure over its baseline."""
    out: dict = {"api": {}, "langgraph": {}, "http": {}, "push_pop": {}}
    for workers, ops in results["api"].items():
        out["api"][workers] = {name: round(f["ops"] / f["django"], 3) for name, f in ops.items()}
        out["langgraph"][workers] = {
            name: round(f["ops"] / f["langgraph"], 3) for name, f in ops.items() if "langgraph" in f
        }
    out["http"] = {
        name: round(f["rps"] / f["drf_rps"], 3) for name, f in results["http"]["endpoints"].items()
    }
    pp = results["push_pop"]
    shortest, longest = pp[min(pp, key=int)], pp[max(pp, key=int)]
    out["push_pop"] = {op: round(shortest[op] / longest[op], 3) for op in shortest}
    out["outbox"] = {
        workers: round(ops["request approval"]["ops"] / ops["request approval, webhook"]["ops"], 3)
        for workers, ops in results["api"].items()
    }
    out["budget"] = {
        workers: round(ops["add_usage"]["ops"] / ops["add_usage, budget"]["ops"], 3)
        for workers, ops in results["api"].items()
    }
    return out


def met(value: float, goal: str) -> str:
    if goal in LOWER_IS_BETTER:
        ok = value <= GOALS[goal]
    elif goal == "peer":
        ok = value > GOALS[goal]
    else:
        ok = value >= GOALS[goal]
    return "ok" if ok else "MISSED"


def trips(count: dict, goal: str) -> str:
    """A count of statements and round trips, as ``2`` or ``3/4`` (statements/round trips)."""
    statements, round_trips = count.get("statements", count.get("queries")), count["round_trips"]
    shown = f"{statements}" if statements == round_trips else f"{statements}/{round_trips}"
    return shown if round_trips <= TRIPS[goal] else shown + "*"


def latency(f: dict, prefix: str, suffix: str = "") -> str:
    """``p50/p99`` in milliseconds of the figures ``f``'s ``<prefix>p50<suffix>``, or
    nothing where not measured."""
    p50, p99 = f.get(f"{prefix}p50{suffix}"), f.get(f"{prefix}p99{suffix}")
    if p50 is None or p99 is None:
        return ""
    return f"{p50:,.2f}/{p99:,.2f}"


def report(results: dict) -> None:
    r, api, counted = results["ratios"], results["api"], results["api_counts"]
    pg = results["pgbench"]
    print(
        "\npgbench (tps): "
        + "; ".join(
            f"{script} {pg['1'][script]:,.0f} @1, {pg['8'][script]:,.0f} @8" for script in pg["1"]
        )
    )
    print(
        f"\n{'Python API':<17}{'stmts':>6}"
        + "".join(
            f"{'ops/s @' + w:>10}{'p50/p99':>16}{'Django':>8}{'p50/p99':>16}{'psycopg':>9}"
            f"{'ratio':>7}{'':7}"
            for w in api
        )
    )
    for name in api["1"]:
        print(
            f"{name:<17}{trips(counted[name], 'api'):>6}"
            + "".join(
                f"{api[w][name]['ops']:>10,.0f}{latency(api[w][name], ''):>16}"
                f"{api[w][name]['django']:>8,.0f}{latency(api[w][name], 'django_'):>16}"
                f"{api[w][name]['psycopg']:>9,.0f}"
                f"{r['api'][w][name]:>7.2f} {met(r['api'][w][name], 'api'):<6}"
                for w in api
            )
        )
    floors = ", ".join(
        f"{name} {trips(counted[name], 'api')}" for name in counted if name.startswith("Django ")
    )
    print(
        f"  ratio: over the Django-cursor loop (goal {GOALS['api']}); p50/p99: one call's"
        " median and 99th percentile (ms); stmts: statements per call"
        f" (statements/round trips where they differ; * over {TRIPS['api']}); floors: {floors}"
    )
    rows = work_rows(results)
    if rows:
        print(
            f"\n{'one call':<26}{'ratio @1 / @8':>14}" + "".join(f"{h:>20}" for h in WORK_HEADINGS)
        )
        for name, ratios, f, floor in rows:
            print(f"{name:<26}{ratios:>14}" + "".join(f"{c:>20}" for c in work_cells(f, floor)))
        print("  " + WORK_NOTE.replace("`", ""))
    for w, pair in r["langgraph"].items():
        print(
            f"vs LangGraph PostgresStore @{w}: "
            + ", ".join(f"{op} {ratio:.2f}x {met(ratio, 'peer')}" for op, ratio in pair.items())
        )
    if "langgraph_peers" in results:
        from bench import langgraph_ops

        print("\n" + langgraph_ops.report(results["langgraph_peers"]))
    if "sessions" in results:
        from bench import sessions

        print("\n" + sessions.report(results["sessions"]))
    http = results["http"]
    print(
        f"\n{'REST (gunicorn, wrk)':<33}{'req/s':>7}{'p50/p99':>14}{'DRF':>7}{'p50/p99':>14}"
        f"{'bare':>7}{'ratio':>7}{'':7}{'trips':>6}  failed"
    )
    for name, f in http["endpoints"].items():
        ratio = r["http"][name]
        status = "" if 200 <= f["status"] < 300 else f" (probe answered {f['status']})"
        print(
            f"{name:<33}{f['rps']:>7,.0f}{latency(f, '', '_ms'):>14}{f['drf_rps']:>7,.0f}"
            f"{latency(f, 'drf_', '_ms'):>14}{f['bare_rps']:>7,.0f}"
            f"{ratio:>7.2f} {met(ratio, 'http'):<6}{trips(f, 'http'):>6}  {f['failed']}"
            f" (baselines {f['drf_failed'] + f['bare_failed']}){status}"
        )
    print(
        f"  ratio: over the bare DRF view with DRF's TokenAuthentication (goal {GOALS['http']});"
        f" trips: database queries per request (queries/round trips where they differ;"
        f" * over {TRIPS['http']}); baselines: "
        + ", ".join(f"{name} {trips(f, 'http')}" for name, f in http["baselines"].items())
    )
    if listed := pages_listed(http):
        print(f"  {listed}")
    print(
        "\npush/pop cost at the longest list over the shortest:",
        ", ".join(f"{op} {v:.2f}x {met(v, 'scale')}" for op, v in r["push_pop"].items()),
    )
    for n, ops in results.get("push_pop_latency", {}).items():
        print(
            f"  at {int(n):,} elements, one call's p50/p99 (ms): "
            + ", ".join(f"{op} {latency(f, '', '_ms')}" for op, f in ops.items())
        )
    print(
        "filing an approval request with a webhook's outbox row over without one: "
        + ", ".join(f"{v:.2f}x @{w} {met(v, 'outbox')}" for w, v in r["outbox"].items())
        + f" (goal at most {GOALS['outbox']}x)"
    )
    print(
        "add_usage under a run's and a user's budget over without one: "
        + ", ".join(f"{v:.2f}x @{w} {met(v, 'budget')}" for w, v in r["budget"].items())
        + f" (goal at most {GOALS['budget']}x)"
    )
    sweep_report(results)


def pages_listed(http: dict) -> str:
    """What each page's exact count read (the rows its listing holds for the caller),
    the part of a page's cost that grows with them: empty when no page was loaded."""
    listed = [(name, f["listed"]) for name, f in http["endpoints"].items() if "listed" in f]
    if not listed:
        return ""
    return "pages: the listing's count read " + ", ".join(
        f"{n:,} row{'' if n == 1 else 's'} ({name})" for name, n in listed
    )


# The sweeps measured at two sizes: each one's key in the results, and what it sweeps.
SWEEPS = (
    ("sweep", "expired pauses"),
    ("retention", "events past retention"),
    ("store", "store items past their TTL (among as many not)"),
)


def sweep_report(results: dict) -> None:
    """The sweeps' lines: each one's time, peak memory growth and batches, and the
    larger over the smaller."""
    for what, label in SWEEPS:
        for rows, f in results[what].items():
            cpu = (
                f" (CPU {f['client_cpu_seconds']:.1f} s client, {f['server_cpu_seconds']:.1f} s"
                " server)"
                if f.get("server_cpu_seconds") is not None
                else ""
            )
            print(
                f"sweep of {int(rows):,} {label}: {f['seconds']:.1f} s{cpu}, "
                f"peak memory +{f['peak_mib']:.0f} MiB, a batch's p50/p99"
                f" {latency(f, 'batch_', '_ms')} ms (fill {f['fill_seconds']:.1f} s)"
            )
        (small, f_small), (large, f_large) = sorted(results[what].items(), key=lambda i: int(i[0]))
        cpu = ""
        if f_small.get("server_cpu_seconds") and f_large.get("server_cpu_seconds"):
            cpu = ", {:.1f}x the CPU time (client and server process)".format(
                (f_large["client_cpu_seconds"] + f_large["server_cpu_seconds"])
                / (f_small["client_cpu_seconds"] + f_small["server_cpu_seconds"])
            )
        print(
            f"  {int(large):,} over {int(small):,}: {f_large['seconds'] / f_small['seconds']:.1f}x"
            f" the time{cpu} for {int(large) / int(small):.0f}x the rows"
        )


def markdown(results: dict) -> str:
    """The figures as the README's tables."""
    r, api, counted = results["ratios"], results["api"], results["api_counts"]
    lines = [
        "| Python API | kind | statements | ops/s @1 | p50/p99 ms | Django cursor @1 "
        f"| p50/p99 ms | psycopg @1 | ratio @1 (≥ {GOALS['api']}) | ops/s @8 | p50/p99 ms "
        f"| Django cursor @8 | p50/p99 ms | psycopg @8 | ratio @8 (≥ {GOALS['api']}) |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, f in api["1"].items():
        cells = [
            f"{api[w][name]['ops']:,.0f} | {latency(api[w][name], '')} "
            f"| {api[w][name]['django']:,.0f} | {latency(api[w][name], 'django_')} "
            f"| {api[w][name]['psycopg']:,.0f} | {r['api'][w][name]:.2f}"
            for w in ("1", "8")
        ]
        lines.append(
            f"| {name} | {f['kind']} | {trips(counted[name], 'api')} | {' | '.join(cells)} |"
        )
    lines += [
        "",
        "Statements: per call (statements/round trips where they differ; * over"
        f" {TRIPS['api']}). The floors: "
        + ", ".join(
            f"{name} {trips(counted[name], 'api')}"
            for name in counted
            if name.startswith("Django ")
        )
        + ".",
        "",
    ]
    rows = work_rows(results)
    if rows:
        lines += [
            f"| one call | ratio @1 / @8 | {' | '.join(WORK_HEADINGS)} |",
            "|---|--:|--:|--:|--:|--:|--:|",
        ]
        lines += [
            f"| {name} | {ratios} | {' | '.join(work_cells(f, floor))} |"
            for name, ratios, f, floor in rows
        ]
        lines += ["", WORK_NOTE, ""]
    lines += [
        f"| ours / LangGraph PostgresStore (> {GOALS['peer']}) | @1 | @8 |",
        "|---|--:|--:|",
    ]
    lines += [
        f"| {op} | {r['langgraph']['1'][op]:.2f} | {r['langgraph']['8'][op]:.2f} |"
        for op in r["langgraph"]["1"]
    ]
    if "langgraph_peers" in results:
        from bench import langgraph_ops

        lines += ["", langgraph_ops.markdown(results["langgraph_peers"]).rstrip("\n")]
    if "sessions" in results:
        from bench import sessions

        lines += ["", sessions.markdown(results["sessions"]).rstrip("\n")]
    http = results["http"]
    lines += [
        "",
        "| REST endpoint | req/s | p50/p99 ms | DRF floor req/s | p50/p99 ms "
        f"| bare Django view req/s | ratio (≥ {GOALS['http']}) | round trips | failed |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    lines += [
        f"| {name} | {f['rps']:,.0f} | {latency(f, '', '_ms')} | {f['drf_rps']:,.0f} "
        f"| {latency(f, 'drf_', '_ms')} | {f['bare_rps']:,.0f} "
        f"| {r['http'][name]:.2f} | {trips(f, 'http')} | {f['failed']} |"
        for name, f in http["endpoints"].items()
    ]
    lines += [
        "",
        "Round trips: database queries of one request (queries/round trips where they differ;"
        f" * over {TRIPS['http']}). The baselines: "
        + ", ".join(f"{name} {trips(f, 'http')}" for name, f in http["baselines"].items())
        + ".",
    ]
    if listed := pages_listed(http):
        lines += ["", f"{listed[0].upper()}{listed[1:]}."]
    pg = results["pgbench"]
    lines += ["", "| pgbench (tps) | @1 | @8 |", "|---|--:|--:|"]
    lines += [
        f"| {script} | {pg['1'][script]:,.0f} | {pg['8'][script]:,.0f} |" for script in pg["1"]
    ]
    lines += [
        "",
        "| push/pop | "
        + " | ".join(f"{int(n):,} elements" for n in results["push_pop"])
        + f" | cost longest / shortest (≤ {GOALS['scale']}) |",
        "|---|" + "--:|" * (len(results["push_pop"]) + 1),
    ]
    latencies = results.get("push_pop_latency", {})
    for op, ratio in r["push_pop"].items():
        rates = " | ".join(
            f"{f[op]:,.0f}/s"
            + (f" ({latency(latencies[n][op], '', '_ms')} ms)" if n in latencies else "")
            for n, f in results["push_pop"].items()
        )
        lines.append(f"| {op} | {rates} | {ratio:.2f} |")
    lines += [
        "",
        f"| filing an approval request: with a webhook / without (≤ {GOALS['outbox']}) | @1 | @8 |",
        "|---|--:|--:|",
        f"| cost of the outbox row | {r['outbox']['1']:.2f} | {r['outbox']['8']:.2f} |",
        "",
        f"| add_usage: under a run's and a user's budget / without (≤ {GOALS['budget']}) | @1 | @8 |",
        "|---|--:|--:|",
        f"| cost of the budgets | {r['budget']['1']:.2f} | {r['budget']['8']:.2f} |",
    ]
    lines += [
        "",
        "| expiry sweep | time | a batch's p50/p99 ms | peak memory growth |",
        "|---|--:|--:|--:|",
    ]
    lines += [
        f"| {int(rows):,} {label} | {f['seconds']:.1f} s | {latency(f, 'batch_', '_ms')} "
        f"| {f['peak_mib']:.0f} MiB |"
        for what, label in SWEEPS
        for rows, f in results[what].items()
    ]
    return "\n".join(lines) + "\n"


def chart(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r, counted = results["ratios"], results["api_counts"]
    http = results["http"]["endpoints"]
    fig, axes = plt.subplots(2, 2, figsize=(14, 11), gridspec_kw={"height_ratios": [1, 1.6]})
    panels = [
        (
            axes[0][0],
            "Python API / Django-cursor loop [statements]",
            r["api"],
            GOALS["api"],
            {name: trips(count, "api") for name, count in counted.items()},
        ),
        (axes[0][1], "Ours / LangGraph PostgresStore", r["langgraph"], GOALS["peer"], {}),
        (
            axes[1][0],
            "REST / bare DRF view with TokenAuthentication [round trips]",
            {"": r["http"]},
            GOALS["http"],
            {name: trips(f, "http") for name, f in http.items()},
        ),
        (
            axes[1][1],
            "push/pop cost: longest list / shortest",
            {"": r["push_pop"]},
            GOALS["scale"],
            {},
        ),
    ]
    for ax, title, series, goal, notes in panels:
        names = list(next(iter(series.values())))
        height = 0.8 / len(series)
        for i, (label, values) in enumerate(series.items()):
            ax.barh(
                [n + i * height for n in range(len(names))],
                [values[k] for k in names],
                height,
                label=f"{label} worker(s)" if label else None,
            )
        labels = [f"{name} [{notes[name]}]" if name in notes else name for name in names]
        ax.set_yticks([n + height * (len(series) - 1) / 2 for n in range(len(names))], labels)
        ax.invert_yaxis()
        ax.axvline(goal, color="red", linestyle="--", linewidth=1)
        ax.set_title(title)
        if len(series) > 1:
            ax.legend(loc="best")
    m = results["machine"]
    fig.suptitle(
        f"agentstate benchmark: {m['cores']} cores, {m['ram_gib']} GiB, "
        f"PostgreSQL {m['postgresql'].split()[0]}, Python {m['python']}; dashed: goals"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def push_pop(results: dict, quick: bool) -> dict:
    """push/pop rates by list length; their p50 and p99 go to ``push_pop_latency``."""
    from bench import scale

    rates, results["push_pop_latency"] = scale.push_pop(*((100, 3) if quick else (300, 5)))
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s measurements, smaller sweep")
    parser.add_argument(
        "--sweep-only", action="store_true", help="the sweeps only (printed, and the JSON)"
    )
    parser.add_argument("--out", type=Path, default=env.ROOT / "bench" / "results")
    args = parser.parse_args()
    seconds, http_seconds = (1, 1) if args.quick else (2, 3)
    sweeps = (10_000, 100_000) if args.quick else (100_000, 1_000_000)

    missing = [program for program in ("pgbench", "wrk") if shutil.which(program) is None]
    if missing and not args.sweep_only:
        sys.exit(
            f"bench/run.py needs {' and '.join(missing)} on PATH"
            " (Debian: apt-get install postgresql-client wrk)."
        )
    began = time.perf_counter()
    env.create_database()
    env.setup_django()
    env.migrate()
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)
    from bench import langgraph_ops, scale, sessions, web

    results: dict = {"machine": machine(), "quick": args.quick, "seconds": seconds}
    print("machine:", json.dumps(results["machine"]))
    steps = [
        ("pgbench", lambda: pgbench(seconds)),
        ("api_counts", api_counts),
        ("api", lambda: python_api(seconds)),
        ("api_work", lambda: api_work(args.quick)),
        ("langgraph_peers", lambda: langgraph_ops.measure(seconds)),
        ("http", lambda: web.measure(http_seconds, int(http_seconds * 2000))),
        ("push_pop", lambda: push_pop(results, args.quick)),
        ("sweep", lambda: {str(rows): scale.expiry_sweep(rows) for rows in sweeps}),
        ("retention", lambda: {str(rows): scale.retention_sweep(rows) for rows in sweeps}),
        ("store", lambda: {str(rows): scale.store_sweep(rows) for rows in sweeps}),
        ("sessions", lambda: sessions.measure(seconds)),
    ]
    if args.sweep_only:
        steps = [step for step in steps if step[0] in dict(SWEEPS)]
    for name, step in steps:
        print(f"{name}...", flush=True)
        results[name] = step()
    if args.sweep_only:
        sweep_report(results)
        args.out.mkdir(parents=True, exist_ok=True)
        stem = args.out / time.strftime("%Y%m%d-%H%M%S-sweep")
        stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {stem}.json")
        return
    results["ratios"] = ratios(results)
    results["total_seconds"] = round(time.perf_counter() - began, 1)
    report(results)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / time.strftime("%Y%m%d-%H%M%S")
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(results))
    chart(results, stem.with_suffix(".png"))
    print(f"\n{results['total_seconds']:.0f} s; wrote {stem}.json, .md (the tables) and .png")


if __name__ == "__main__":
    main()
