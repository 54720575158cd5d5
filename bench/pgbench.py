"""pgbench on the same database: the database's own limit, C client, prepared statements."""

import re
import subprocess
import tempfile

from bench.env import dsn

UPDATE_SCRIPT = """\\set aid random(1, 100000 * :scale)
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
"""


def initialise() -> None:
    subprocess.run(["pgbench", "-i", "-q", "-s", "1", dsn()], check=True, capture_output=True)


def tps(script: str, workers: int, seconds: float) -> float:
    """Transactions per second of ``script`` (``select-only``: pgbench's own) at ``workers`` clients."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as file:
        file.write(UPDATE_SCRIPT)
        file.flush()
        chosen = ["-b", "select-only"] if script == "select-only" else ["-f", file.name]
        out = subprocess.run(
            [
                "pgbench",
                "-n",
                "-M",
                "prepared",
                "-c",
                str(workers),
                "-j",
                str(workers),
                "-T",
                str(max(1, round(seconds))),
                *chosen,
                dsn(),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    return float(re.search(r"tps = ([\d.]+)", out).group(1))
