"""The benchmark of docs/performance.md: every figure a ratio to a baseline measured in this run.

    .venv/bin/python bench/run.py            # the full run (under ten minutes on 2 cores)
    .venv/bin/python bench/run.py --quick    # shorter measurements, smaller sweep

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
GOALS = {"write": 0.7, "read": 0.5, "http": 0.7, "scale": 1.5}
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
    """Each operation's rate beside its baseline's, measured just before it (the machine drifts)."""
    from bench import api_ops
    from bench.workers import rate

    api_ops.prepare_baselines()
    baselines = api_ops.baseline_operations()
    figures: dict = {}
    for workers in WORKERS:
        supply = int(seconds * RATE_CEILING / min(workers, os.cpu_count() or 1))
        figures[str(workers)] = ops = {}
        for name, (kind, start) in api_ops.our_operations(supply).items():
            psycopg = baselines["psycopg UPDATE" if kind == "write" else "psycopg SELECT"][1]
            ops[name] = {
                "kind": kind,
                "psycopg": round(rate(psycopg, workers, seconds), 1),
                "ops": round(rate(start, workers, seconds), 1),
            }
            if f"LangGraph {name}" in baselines:
                peer = baselines[f"LangGraph {name}"][1]
                ops[name]["langgraph"] = round(rate(peer, workers, seconds), 1)
        print(f"  {workers} worker(s): done", flush=True)
    return figures


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
        out["api"][workers] = {name: round(f["ops"] / f["psycopg"], 3) for name, f in ops.items()}
        out["langgraph"][workers] = {
            name: round(f["ops"] / f["langgraph"], 3) for name, f in ops.items() if "langgraph" in f
        }
    out["http"] = {name: round(f["rps"] / f["bare_rps"], 3) for name, f in results["http"].items()}
    pp = results["push_pop"]
    shortest, longest = pp[min(pp, key=int)], pp[max(pp, key=int)]
    out["push_pop"] = {op: round(shortest[op] / longest[op], 3) for op in shortest}
    return out


def met(value: float, goal: str) -> str:
    ok = value <= GOALS[goal] if goal == "scale" else value >= GOALS[goal]
    return "ok" if ok else "MISSED"


def report(results: dict) -> None:
    r, api = results["ratios"], results["api"]
    print("\npgbench (tps):", json.dumps(results["pgbench"]))
    print(
        f"\n{'Python API':<11}"
        + "".join(f"{'ops/s @' + w:>10}{'psycopg':>9}{'ratio':>7}{'':7}" for w in api)
    )
    for name, f in api["1"].items():
        goal = f["kind"]
        print(
            f"{name:<11}"
            + "".join(
                f"{api[w][name]['ops']:>10,.0f}{api[w][name]['psycopg']:>9,.0f}"
                f"{r['api'][w][name]:>7.2f} {met(r['api'][w][name], goal):<6}"
                for w in api
            )
        )
    for w, pair in r["langgraph"].items():
        print(
            f"vs LangGraph PostgresStore @{w}: "
            + ", ".join(f"{op} {ratio:.2f}x" for op, ratio in pair.items())
        )
    print(f"\n{'HTTP (gunicorn, wrk)':<22}{'req/s':>7}{'bare':>7}{'ratio':>7}  failed")
    for name, f in results["http"].items():
        ratio = r["http"][name]
        print(
            f"{name:<22}{f['rps']:>7,.0f}{f['bare_rps']:>7,.0f}{ratio:>7.2f} {met(ratio, 'http'):<6}"
            f" {f['failed']} (bare {f['bare_failed']})"
        )
    print(
        "\npush/pop cost at the longest list over the shortest:",
        ", ".join(f"{op} {v:.2f}x {met(v, 'scale')}" for op, v in r["push_pop"].items()),
    )
    for rows, f in results["sweep"].items():
        print(
            f"sweep of {int(rows):,} expired pauses: {f['seconds']:.1f} s, "
            f"peak memory +{f['peak_mib']:.0f} MiB (fill {f['fill_seconds']:.1f} s)"
        )


def markdown(results: dict) -> str:
    """The figures as the README's tables."""
    r, api = results["ratios"], results["api"]
    goal = {"write": "0.7", "read": "0.5"}
    header = (
        "| Python API | kind (goal) | ops/s @1 | psycopg @1 | ratio @1 | ops/s @8 "
        "| psycopg @8 | ratio @8 |"
    )
    lines = [header, "|---|---|--:|--:|--:|--:|--:|--:|"]
    for name, f in api["1"].items():
        cells = [
            f"{api[w][name]['ops']:,.0f} | {api[w][name]['psycopg']:,.0f} | {r['api'][w][name]:.2f}"
            for w in ("1", "8")
        ]
        lines.append(f"| {name} | {f['kind']} (≥ {goal[f['kind']]}) | {' | '.join(cells)} |")
    lines += ["", "| ours / LangGraph PostgresStore | @1 | @8 |", "|---|--:|--:|"]
    lines += [
        f"| {op} | {r['langgraph']['1'][op]:.2f} | {r['langgraph']['8'][op]:.2f} |"
        for op in r["langgraph"]["1"]
    ]
    lines += [
        "",
        "| REST endpoint | req/s | bare view req/s | ratio (≥ 0.7) | failed |",
        "|---|--:|--:|--:|--:|",
    ]
    lines += [
        f"| {name} | {f['rps']:,.0f} | {f['bare_rps']:,.0f} | {r['http'][name]:.2f} "
        f"| {f['failed']} |"
        for name, f in results["http"].items()
    ]
    pg = results["pgbench"]
    lines += ["", "| pgbench (tps) | @1 | @8 |", "|---|--:|--:|"]
    lines += [
        f"| {script} | {pg['1'][script]:,.0f} | {pg['8'][script]:,.0f} |" for script in pg["1"]
    ]
    lines += [
        "",
        "| push/pop | "
        + " | ".join(f"{int(n):,} elements" for n in results["push_pop"])
        + " | cost 100k / 10 (≤ 1.5) |",
        "|---|" + "--:|" * (len(results["push_pop"]) + 1),
    ]
    for op, ratio in r["push_pop"].items():
        rates = " | ".join(f"{f[op]:,.0f}/s" for f in results["push_pop"].values())
        lines.append(f"| {op} | {rates} | {ratio:.2f} |")
    lines += ["", "| expiry sweep | time | peak memory growth |", "|---|--:|--:|"]
    lines += [
        f"| {int(rows):,} expired pauses | {f['seconds']:.1f} s | {f['peak_mib']:.0f} MiB |"
        for rows, f in results["sweep"].items()
    ]
    return "\n".join(lines) + "\n"


def chart(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = results["ratios"]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    panels = [
        (axes[0][0], "Python API / psycopg loop (1 and 8 workers)", r["api"], [0.7, 0.5]),
        (axes[0][1], "Ours / LangGraph PostgresStore", r["langgraph"], [1.0]),
        (axes[1][0], "HTTP / bare Django view (gunicorn)", {"": r["http"]}, [0.7]),
        (axes[1][1], "push/pop cost: longest list / shortest", {"": r["push_pop"]}, [1.5]),
    ]
    for ax, title, series, lines in panels:
        names = list(next(iter(series.values())))
        height = 0.8 / len(series)
        for i, (label, values) in enumerate(series.items()):
            ax.barh(
                [n + i * height for n in range(len(names))],
                [values[k] for k in names],
                height,
                label=f"{label} worker(s)" if label else None,
            )
        ax.set_yticks([n + height * (len(series) - 1) / 2 for n in range(len(names))], names)
        ax.invert_yaxis()
        for x in lines:
            ax.axvline(x, color="red", linestyle="--", linewidth=1)
        ax.set_title(title)
        if len(series) > 1:
            ax.legend(loc="lower right")
    m = results["machine"]
    fig.suptitle(
        f"agentstate benchmark: {m['cores']} cores, {m['ram_gib']} GiB, "
        f"PostgreSQL {m['postgresql'].split()[0]}, Python {m['python']}; dashed: goals"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s measurements, smaller sweep")
    parser.add_argument("--out", type=Path, default=env.ROOT / "bench" / "results")
    args = parser.parse_args()
    seconds, http_seconds = (1, 1) if args.quick else (2, 3)
    sweeps = (10_000, 100_000) if args.quick else (100_000, 1_000_000)

    missing = [program for program in ("pgbench", "wrk") if shutil.which(program) is None]
    if missing:
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
    from bench import scale, web

    results: dict = {"machine": machine(), "quick": args.quick, "seconds": seconds}
    print("machine:", json.dumps(results["machine"]))
    steps = [
        ("pgbench", lambda: pgbench(seconds)),
        ("api", lambda: python_api(seconds)),
        ("http", lambda: web.measure(http_seconds, int(http_seconds * 2000))),
        ("push_pop", lambda: scale.push_pop(*((100, 3) if args.quick else (300, 5)))),
        ("sweep", lambda: {str(rows): scale.expiry_sweep(rows) for rows in sweeps}),
    ]
    for name, step in steps:
        print(f"{name}...", flush=True)
        results[name] = step()
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
