"""The fault tests: each starts the real processes it needs (a Redis, a PgBouncer, a
Celery worker, gunicorn) on private ports and stops them, even when it fails.

Every test here is marked ``faults`` by the folder (``pytest -m faults`` runs them alone). Those
that need PostgreSQL are also ``postgres_only``, deselected on SQLite.
"""

import pytest


@pytest.fixture
def redis(tmp_path):
    """A Redis of the test's own (never the shared one), killed at the end."""
    from tests.faults.processes import RedisServer

    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def broker(redis):
    """This process's Celery app, on the test's Redis, current while the test runs."""
    from celery import Celery, current_app

    app = Celery("faults", broker=redis.url)
    app.conf.broker_connection_retry = False
    app.conf.broker_transport_options = {"max_retries": 1, "interval_start": 0}
    previous = current_app._get_current_object()  # the app itself, not the proxy
    app.set_current()
    try:
        yield app
    finally:
        app.close()
        previous.set_current()


@pytest.fixture
def mailer():
    """The bridged mailer registered in this process, as the workers register it."""
    from agentstate import contrib
    from tests import bridged

    bridge = contrib.register(bridged.NAME, bridged.mailer())
    try:
        yield bridge
    finally:
        contrib.unregister(bridged.NAME)
