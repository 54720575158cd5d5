"""Fixtures shared by the whole suite, and its markers.

The database is the one the settings pick: PostgreSQL when ``DATABASE_URL``
is set, else a SQLite *file* (several connections can share it), so the
concurrency tests run on both. Tests marked ``postgres_only`` are deselected
(not skipped) on other databases and when another backend than PostgreSQL's is
forced (``AGENTSTATE_BACKEND``), and ``pgbouncer_only`` ones unless the connection goes
through PgBouncer (``DATABASE_POOLING=transaction``), ``direct_only`` ones when it does.

Each folder of ``tests/`` holds one kind of test and marks its tests with the
folder's name (``backends``, ``api``, ``admin``, ``bridges``, ``adapters``,
``concurrency``, ``faults``, ``docs``, ``site``; the client's own tests are
``client``), a marker registered in pyproject.toml. The kinds in ``SLOW`` are
also marked ``slow``, as are the modules that say so themselves: ``-m "not slow"``
is the fast loop of docs/development.md.

Under pytest-xdist (``scripts/test.sh`` runs it) each worker has a database of
its own (pytest-django suffixes its name with the worker's, ``_gw0``...), which
the servers and workers the tests start are handed, and a Redis database of its
own: ``REDIS_URL``'s number for the first worker, the one below for the second,
and so on, so that no worker's Celery takes another's tasks. The tests of
``tests/site/`` build this checkout (pip, uv) and run on one worker, one after
another.
"""

import gc
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection, connections
from rest_framework.test import APIClient

ROOT = Path(__file__).resolve().parent.parent

# Kinds that start servers, workers, clusters or many threads: seconds a test.
SLOW = {"concurrency", "contract", "faults", "site", "waiting"}


def kind(item: pytest.Item) -> str:
    """The folder under tests/ that holds the test, or ``client``."""
    parts = item.path.relative_to(ROOT).parts
    if parts[0] != "tests":
        return "client"
    if len(parts) == 2:
        raise pytest.UsageError(
            f"{item.path.relative_to(ROOT)}: a test module goes in the folder of its kind "
            "(tests/backends/, tests/api/, ... see docs/development.md)"
        )
    return parts[1]


def pytest_configure(config):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and os.environ.get("REDIS_URL"):
        url = urlsplit(os.environ["REDIS_URL"])
        number = (int(url.path.strip("/") or 0) - int(worker.removeprefix("gw"))) % 16
        os.environ["REDIS_URL"] = urlunsplit(url._replace(path=f"/{number}"))


# The database-dependent part of the suite (marked ``db``: ``pytest -m db``), what CI
# runs again on each further database and backend: the contract suite, and the
# modules whose every test stores and reads through the backend.
CONTRACT = Path(__file__).resolve().parent / "contract"
DATABASE_DEPENDENT = {
    "test_access",
    "test_approvals",
    "test_bound_calls",
    "test_budgets",
    "test_budgets_concurrency",
    "test_context",
    "test_context_api",
    "test_context_concurrency",
    "test_context_lists",
    "test_deadlines",
    "test_events",
    "test_langgraph_bridge",
    "test_langgraph_saver",
    "test_langgraph_store",
    "test_langgraph_store_ops",
    "test_langgraph_thread_touch",
    "test_limits",
    "test_oversight_concurrency",
    "test_pagination",
    "test_pauses",
    "test_pauses_api",
    "test_pauses_concurrency",
    "test_pauses_processes",
    "test_policies",
    "test_policies_api",
    "test_policies_concurrency",
    "test_rest_conformance",
    "test_rules",
    "test_runs",
    "test_runs_api",
    "test_runs_concurrency",
    "test_signals",
    "test_standing_decisions",
    "test_status_constraints",
    "test_sweep",
    "test_toolcontext",
    "test_tools",
    "test_visibility",
    "test_votes",
    "test_webhooks",
    "test_worked_example",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = kind(item)
        # An unregistered name fails under --strict-markers: a new folder is a new marker.
        item.add_marker(getattr(pytest.mark, name))
        if name in SLOW:
            item.add_marker(pytest.mark.slow)
        if name == "site":
            item.add_marker(pytest.mark.xdist_group("site"))

    from django.conf import settings

    from agentstate.backends import BY_VENDOR

    absent = set()
    forced = settings.AGENTSTATE.get("BACKEND")
    if not settings.DATABASES["default"]["ENGINE"].endswith("postgresql") or (
        forced and forced != BY_VENDOR["postgresql"]
    ):
        absent.add("postgres_only")
    for item in items:
        if item.path.parent == CONTRACT or item.path.stem in DATABASE_DEPENDENT:
            item.add_marker(pytest.mark.db)
    if os.environ.get("DATABASE_POOLING") == "transaction":
        absent.add("direct_only")
    else:
        absent.add("pgbouncer_only")
    kept = [item for item in items if not absent & set(item.keywords)]
    deselected = [item for item in items if absent & set(item.keywords)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """pytest-django's, and before it drops the test database, the connections it
    does not know closed: the waiters' thread's, and those of the savers the tests
    left to the garbage collector (each closes its own when collected)."""
    yield
    from agentstate.services import wakeups

    gc.collect()
    wakeups.close_connections()


@pytest.fixture
def is_postgres() -> bool:
    return connection.vendor == "postgresql"


@pytest.fixture
def make_user(db):
    def make(username: str, *perms: str, **extra):
        user = get_user_model().objects.create_user(username, password="pw", **extra)
        for perm in perms:
            app_label, codename = perm.split(".")
            user.user_permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )
        return user

    return make


@pytest.fixture
def alice(make_user):
    return make_user("alice")


@pytest.fixture
def bob(make_user):
    return make_user("bob")


@pytest.fixture
def api_for():
    def client(user=None) -> APIClient:
        api = APIClient()
        if user is not None:
            api.force_authenticate(user)
        return api

    return client


@pytest.fixture
def api(api_for, alice) -> APIClient:
    return api_for(alice)


def run_concurrently(workers: int, target: Callable[[int], Any], timeout: float = 120) -> list[Any]:
    """Run ``target(i)`` in ``workers`` threads, started together by a barrier.

    Each thread has its own database connection, closed when it ends. Returns
    each worker's result, or the exception it raised, in worker order.
    """
    barrier = threading.Barrier(workers)
    results: list[Any] = [None] * workers

    def work(i: int) -> None:
        try:
            barrier.wait()
            results[i] = target(i)
        except BaseException as error:  # noqa: BLE001 - reported to the test
            results[i] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), "a worker hung (deadlock?)"
    return results


@pytest.fixture
def concurrently():
    return run_concurrently


@pytest.fixture
def eager_celery():
    """A Celery app of this thread that runs each task at once, in the caller; the
    app that was current before (the app itself, not Celery's proxy) is current again
    afterwards. Other threads keep theirs: decide in this one."""
    from celery import Celery, current_app

    previous = current_app._get_current_object()
    app = Celery("eager-test", set_as_current=False)
    app.conf.task_always_eager = True
    app.set_current()
    try:
        yield app
    finally:
        previous.set_current()


class StoreClock:
    """The LangGraph store's items as seen later. Their expiry is by the database's
    clock, which a test cannot move: each stored item's ``expires_at`` is moved back
    instead, as the clock moving on would leave it."""

    def advance(self, seconds: float) -> None:
        from agentstate.backends.orm.store import number
        from agentstate.models import Variable
        from agentstate.types import STORE_PREFIX

        items = Variable.objects.filter(
            scope__owner__isnull=True, scope__key__startswith=STORE_PREFIX
        )
        for pk, value in items.values_list("pk", "value"):
            expires = value.get("expires_at") if isinstance(value, dict) else None
            if number(expires):
                Variable.objects.filter(pk=pk).update(
                    value={**value, "expires_at": expires - seconds}
                )


@pytest.fixture
def store_clock():
    return StoreClock()


def is_token_lookup(sql: str) -> bool:
    """Whether ``sql`` is the REST API's token lookup: its statement, or on a
    connection that prepares nothing, ``agentstate_token``, which runs it."""
    return "authtoken_token" in sql or sql.startswith("SELECT * FROM agentstate_token(")
