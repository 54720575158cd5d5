"""Ours beside a peer library on the same database: what the peer sections share.

A section's figures are ``{workers: {operation: {"ours", "theirs", "ratio"}}}``
(operations per second, ratio ours over theirs); ``report`` prints them and
``markdown`` makes their table. The goal is a ratio above ``GOAL``.
"""

GOAL = 1.0


def met(ratio: float) -> str:
    return "ok" if ratio > GOAL else "MISSED"


def report(figures: dict, title: str, legend: str) -> str:
    """The printed table: each operation's rates and ratio at every worker count."""
    lines = [
        f"{title:<24}"
        + "".join(f"{'ours @' + w:>11}{'theirs':>9}{'ratio':>7}{'':7}" for w in figures)
    ]
    for name in next(iter(figures.values())):
        lines.append(
            f"{name:<24}"
            + "".join(
                f"{figures[w][name]['ours']:>11,.0f}{figures[w][name]['theirs']:>9,.0f}"
                f"{figures[w][name]['ratio']:>7.2f} {met(figures[w][name]['ratio']):<6}"
                for w in figures
            )
        )
    lines.append(f"  {legend}; ratio: ours / theirs (goal > {GOAL})")
    return "\n".join(lines)


def markdown(figures: dict, title: str) -> str:
    """The Markdown table, at 1 and 8 workers."""
    lines = [
        f"| {title} | ours @1 | theirs @1 | ratio @1 (> {GOAL}) "
        f"| ours @8 | theirs @8 | ratio @8 (> {GOAL}) |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for name in figures["1"]:
        cells = [
            f"{figures[w][name]['ours']:,.0f} | {figures[w][name]['theirs']:,.0f} "
            f"| {figures[w][name]['ratio']:.2f}"
            for w in ("1", "8")
        ]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"
