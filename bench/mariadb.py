"""The Python API on MariaDB (or MySQL) beside its floors on the same server.

    .venv/bin/python bench/mariadb.py            # 2 s per figure
    .venv/bin/python bench/mariadb.py --quick    # 1 s per figure

As ``bench/run.py`` does on PostgreSQL (the same operations, ``bench.api_ops``,
the same workers, ``bench.workers``): each operation's rate at 1 and 8 worker
processes beside a loop doing one single-row UPDATE (writes) or one SELECT by
key (reads) through Django's ``connection.cursor()`` in autocommit, the floor
of any Django code, and the same loop on a plain mysqlclient connection, the
limit of Python; and each operation's statements and round trips.

``DATABASE_URL`` (default ``mysql://root@127.0.0.1:3306/agentstate_bench``): its
name must contain ``bench``; it is created (server defaults) and migrated.
"""

import argparse
import os
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import env

DEFAULT_URL = "mysql://root@127.0.0.1:3306/agentstate_bench"
WORKERS = (1, 8)
RATE_CEILING = 5000  # operations per second per core that a supply must outlast


def _connect(database: str | None = None):
    import MySQLdb

    url = urlsplit(os.environ["DATABASE_URL"])
    return MySQLdb.connect(
        host=url.hostname or "127.0.0.1",
        port=url.port or 3306,
        user=unquote(url.username or "root"),
        password=unquote(url.password or ""),
        charset="utf8mb4",
        autocommit=True,
        **({"database": database} if database else {}),
    )


def create_database() -> None:
    name = env.db_name()
    if "bench" not in name:
        sys.exit(f"refusing to benchmark on {name!r}: the database's name must contain 'bench'")
    with _connect() as conn, conn.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{name}`")


def _mysqlclient(statement: str):
    """The loop on a plain mysqlclient connection in autocommit."""
    from bench.api_ops import ROWS, SELECT

    def start(index: int):
        cursor = _connect(env.db_name()).cursor()
        if statement == SELECT:

            def select():
                cursor.execute(statement, [index % ROWS])
                return cursor.fetchone()

            return select

        def update():
            return cursor.execute(statement, [index % ROWS])

        return update

    return start


def prepare_baselines() -> None:
    from bench.api_ops import ROW_TABLE, ROWS

    with _connect(env.db_name()) as conn, conn.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {ROW_TABLE}")
        cursor.execute(f"CREATE TABLE {ROW_TABLE} (id int PRIMARY KEY, n bigint NOT NULL)")
        cursor.execute(f"INSERT INTO {ROW_TABLE} SELECT seq, 0 FROM seq_0_to_{ROWS - 1}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s per figure, not 2")
    args = parser.parse_args()
    seconds = 1 if args.quick else 2
    os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    create_database()
    env.setup_django()
    env.migrate()

    from django.db import connection

    from bench import api_ops, counts
    from bench.workers import rate

    with connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        (version,) = cursor.fetchone()
    prepare_baselines()
    floors = {
        "write": (api_ops._django(api_ops.UPDATE), _mysqlclient(api_ops.UPDATE)),
        "read": (api_ops._django(api_ops.SELECT), _mysqlclient(api_ops.SELECT)),
    }
    trips = {}
    for name, (_, start) in {
        **api_ops.our_operations(4),
        "Django UPDATE": ("write", floors["write"][0]),
        "Django SELECT": ("read", floors["read"][0]),
    }.items():
        op = start(0)
        op()
        figure = counts.of(op)
        trips[name] = (figure["statements"], figure["round_trips"])
    print(f"\nPython API on {version} (operations per second; ratio to the Django loop)")
    print(
        f"{'operation':<26}{'workers':>8}{'mysqlclient':>13}{'Django':>10}{'ours':>10}"
        f"{'ratio':>7}{'statements':>12}{'trips':>7}"
    )
    for workers in WORKERS:
        supply = int(seconds * RATE_CEILING / min(workers, os.cpu_count() or 1))
        for name, (kind, start) in api_ops.our_operations(supply).items():
            django_loop, plain_loop = floors[kind]
            plain = rate(plain_loop, workers, seconds)
            floor = rate(django_loop, workers, seconds)
            ours = rate(start, workers, seconds)
            statements, round_trips = trips[name]
            print(
                f"{name:<26}{workers:>8}{plain:>13.0f}{floor:>10.0f}{ours:>10.0f}"
                f"{ours / floor:>7.2f}{statements:>12}{round_trips:>7}",
                flush=True,
            )
    for name in ("Django UPDATE", "Django SELECT"):
        statements, round_trips = trips[name]
        print(f"{name:<26}{'':>48}{statements:>12}{round_trips:>7}")


if __name__ == "__main__":
    main()
