"""The benchmark's own database: chosen, created, migrated, Django set up.

``DATABASE_URL`` names it (default ``postgres://postgres@127.0.0.1:5432/agentstate_bench``).
Its name must contain ``bench``: the harness fills and empties its tables.
"""

import os
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/agentstate_bench"
# Webhook deliveries are queued on the broker after commit, as in production: Redis
# (``REDIS_URL``, default database 14 on 127.0.0.1, emptied first).
DEFAULT_BROKER = "redis://127.0.0.1:6379/14"


def database_url() -> str:
    return os.environ.setdefault("DATABASE_URL", DEFAULT_URL)


def dsn(url: str | None = None) -> str:
    """The URL in the form libpq (psycopg, pgbench) takes."""
    return (url or database_url()).replace("postgres://", "postgresql://", 1)


def db_name() -> str:
    return urlsplit(database_url()).path.lstrip("/")


def create_database() -> None:
    import psycopg

    name = db_name()
    if "bench" not in name:
        sys.exit(f"refusing to benchmark on {name!r}: the database's name must contain 'bench'")
    server = urlunsplit(urlsplit(dsn())._replace(path="/postgres"))
    with psycopg.connect(server, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def setup_django(settings: str = "project.settings") -> None:
    """Django on the benchmark database and broker, DEBUG off (it would keep every query)."""
    sys.path.insert(0, str(ROOT))
    database_url()
    if os.environ.setdefault("REDIS_URL", DEFAULT_BROKER) == DEFAULT_BROKER:
        import redis

        redis.Redis.from_url(DEFAULT_BROKER).flushdb()  # the deliveries a last run queued
    os.environ["DJANGO_SETTINGS_MODULE"] = settings
    os.environ["DJANGO_DEBUG"] = "0"
    import django

    django.setup()


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def rest_site() -> tuple[dict, dict]:
    """The demo site as the REST section serves it (``bench.site_settings``) on the
    benchmark's database, made and migrated, with the baselines' rows: its callers
    (``bench.web.users``) and their tokens."""
    create_database()
    setup_django("bench.site_settings")
    migrate()
    from bench import api_ops, web

    api_ops.prepare_baselines()
    callers = web.users()
    return callers, {caller: token for caller, (_, token) in callers.items()}


def cpu_seconds(pid: int | str) -> float | None:
    """Seconds process ``pid`` of this machine has run on a CPU (the scheduler's
    count, in nanoseconds); ``None`` where it cannot be read (a server on another
    machine)."""
    try:
        with open(f"/proc/{pid}/schedstat") as stat:
            return int(stat.read().split()[0]) / 1e9
    except OSError:
        return None
