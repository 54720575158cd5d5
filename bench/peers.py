"""Ours beside a peer library on the same database: what the peer sections share.

A section's figures are ``{workers: {operation: {"ours", "theirs", "ratio",
"ours_p50", "ours_p99", "theirs_p50", "theirs_p99"}}}`` (operations per second,
ratio ours over theirs, one call's median and 99th percentile in milliseconds);
``report`` prints them and ``markdown`` makes their table. The goal is a
ratio above ``GOAL``. Keys other than worker counts (a section's extra
figures) are left alone.
"""

GOAL = 1.0


def compared(ours: dict[str, float], theirs: dict[str, float]) -> dict[str, float]:
    """One operation's figures from ``bench.workers.measured`` of each side."""
    return {
        "ours": round(ours["rate"], 1),
        "theirs": round(theirs["rate"], 1),
        "ratio": round(ours["rate"] / theirs["rate"], 3),
        "ours_p50": ours["p50_ms"],
        "ours_p99": ours["p99_ms"],
        "theirs_p50": theirs["p50_ms"],
        "theirs_p99": theirs["p99_ms"],
    }


def rate(value: float) -> str:
    """Operations per second: whole above 100, else three significant digits."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _workers(figures: dict) -> list[str]:
    return [w for w in figures if w.isdigit()]


def latency(f: dict, side: str) -> str:
    """``p50/p99`` in milliseconds, or nothing when not measured."""
    if f"{side}_p50" not in f:
        return ""
    return f"{f[side + '_p50']:,.2f}/{f[side + '_p99']:,.2f}"


def met(ratio: float) -> str:
    return "ok" if ratio > GOAL else "MISSED"


def report(figures: dict, title: str, legend: str) -> str:
    """The printed table: each operation's rates and ratio at every worker count."""
    workers = _workers(figures)
    lines = [
        f"{title:<24}"
        + "".join(
            f"{'ours @' + w:>11}{'p50/p99':>20}{'theirs':>9}{'p50/p99':>20}{'ratio':>7}{'':7}"
            for w in workers
        )
    ]
    for name in figures[workers[0]]:
        lines.append(
            f"{name:<24}"
            + "".join(
                f"{rate(figures[w][name]['ours']):>11}{latency(figures[w][name], 'ours'):>20}"
                f"{rate(figures[w][name]['theirs']):>9}{latency(figures[w][name], 'theirs'):>20}"
                f"{figures[w][name]['ratio']:>7.2f} {met(figures[w][name]['ratio']):<6}"
                for w in workers
            )
        )
    lines.append(
        f"  {legend}; p50/p99: one call's median and 99th percentile (ms);"
        f" ratio: ours / theirs (goal > {GOAL})"
    )
    return "\n".join(lines)


def markdown(figures: dict, title: str) -> str:
    """The Markdown table, at 1 and 8 workers."""
    lines = [
        f"| {title} | ours @1 | p50/p99 ms | theirs @1 | p50/p99 ms | ratio @1 (> {GOAL}) "
        f"| ours @8 | p50/p99 ms | theirs @8 | p50/p99 ms | ratio @8 (> {GOAL}) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name in figures["1"]:
        cells = [
            f"{rate(figures[w][name]['ours'])} | {latency(figures[w][name], 'ours')} "
            f"| {rate(figures[w][name]['theirs'])} | {latency(figures[w][name], 'theirs')} "
            f"| {figures[w][name]['ratio']:.2f}"
            for w in ("1", "8")
        ]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"
