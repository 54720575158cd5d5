"""Server-side prepared statements follow the connection's ``prepare_threshold``.

Set (``DATABASES["default"]["OPTIONS"]["prepare_threshold"]``, what the demo
site and these tests do on a direct connection): agentstate's operations and
token lookups bind on the server, and psycopg prepares each statement once it
ran that many times. Unset (Django's default, and the setting behind PgBouncer
in transaction mode, ``tests/site/test_pgbouncer.py``): nothing is prepared, and no
statement outlives its transaction.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from agentstate.api.authentication import TokenAuthentication
from agentstate.exceptions import ScopeNotFound
from agentstate.services import context

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    # A statement prepared on one server connection is not on the next one a
    # pooler hands out: tests/site/test_pgbouncer.py checks that none is prepared there.
    pytest.mark.direct_only,
]


@contextmanager
def threshold(value: int | None) -> Iterator[None]:
    """The connection's ``prepare_threshold`` (psycopg's own attribute) for a while,
    its prepared statements dropped before and after."""
    connection.ensure_connection()
    raw = connection.connection
    before = raw.prepare_threshold
    raw.execute("DEALLOCATE ALL")
    raw._prepared.clear()
    raw.prepare_threshold = value
    try:
        yield
    finally:
        raw.prepare_threshold = before
        raw.execute("DEALLOCATE ALL")
        raw._prepared.clear()


def prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [statement for (statement,) in cursor.fetchall()]


def test_operations_are_prepared_once_they_ran_threshold_times():
    with threshold(2):
        context.put("prepared", "v", 1)
        context.put("prepared", "v", 2)
        assert prepared() == []
        context.put("prepared", "v", 3)
        (statement,) = prepared()
        assert "agentstate_put(" in statement
        context.put("prepared", "v", 4)
        assert context.get("prepared", ["v"]) == {"v": 4}
        assert len(prepared()) == 1  # the put's, run again; get's not yet


def test_a_refusal_through_a_prepared_statement_is_the_same_refusal():
    with threshold(0):
        for _ in range(2):
            with pytest.raises(ScopeNotFound):
                context.pop("prepared", "missing", "FIFO")
        assert any("agentstate_pop(" in statement for statement in prepared())


def test_the_token_lookup_is_prepared(django_user_model):
    user = django_user_model.objects.create_user("prepared")
    key = Token.objects.create(user=user).key
    with threshold(0):
        for _ in range(2):
            found, token = TokenAuthentication().authenticate_credentials(key)
            assert found.pk == user.pk and token.key == key
        assert len(prepared()) == 1


def test_nothing_is_prepared_without_a_threshold():
    with threshold(None):
        for n in range(10):
            context.put("unprepared", "v", n)
            assert context.get("unprepared", ["v"]) == {"v": n}
        assert prepared() == []
