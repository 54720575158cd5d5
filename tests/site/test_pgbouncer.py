"""The suite's PgBouncer stage really runs through PgBouncer in transaction pooling mode.

Selected only when ``DATABASE_POOLING=transaction`` (``.ci/run`` sets it for the
stage that connects through ``scripts/pgbouncer.sh``); deselected otherwise.
"""

import psycopg
import pytest
from django.db import connection

from agentstate.services import context

pytestmark = [pytest.mark.pgbouncer_only, pytest.mark.django_db(transaction=True)]


def test_the_connection_goes_through_pgbouncer_in_transaction_mode():
    with connection.cursor() as cursor:
        cursor.execute("SELECT inet_server_port()")
        (server_port,) = cursor.fetchone()
    settings = connection.settings_dict
    assert str(server_port) != str(settings["PORT"]), "connected to PostgreSQL itself"
    with psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"],
        user=settings["USER"],
        dbname="pgbouncer",
        autocommit=True,
    ) as admin:
        config = {row[0]: row[1] for row in admin.execute("SHOW CONFIG").fetchall()}
    assert config["pool_mode"] == "transaction"
    assert settings["DISABLE_SERVER_SIDE_CURSORS"]


def test_operations_need_no_session_state():
    """Each operation is one statement in autocommit: consecutive ones may run on
    different server connections and still see each other's work."""
    for i in range(20):
        context.push("pooled", "list", i)
    assert context.get("pooled", ["list"]) == {"list": list(range(20))}
    assert context.pop("pooled", "list", "FIFO") == 0


def test_no_statement_is_prepared():
    """Debian's PgBouncer (1.18) keeps no prepared statement from one transaction to
    the next: the site leaves ``prepare_threshold`` unset there, and psycopg prepares
    nothing however often an operation runs."""
    assert "prepare_threshold" not in connection.settings_dict["OPTIONS"]
    connection.ensure_connection()
    assert connection.connection.prepare_threshold is None
    for i in range(10):
        context.put("pooled", "prepared", i)
        assert context.get("pooled", ["prepared"]) == {"prepared": i}
    assert not connection.connection._prepared._names
