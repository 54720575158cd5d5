"""On PostgreSQL a list read (``get_list``) and a many-value append (``extend``) are
one round trip each, refused or not, through the Python API; over REST the read
costs the token lookup and that one call.

In autocommit (``transaction=True``), so that no savepoint is counted.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentstate.exceptions import ScopeNotFound, TypeConflict, VariableNotFound
from agentstate.services import context

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]


def one_call(operation, function: str, *args, **kwargs):
    with CaptureQueriesContext(connection) as queries:
        result = operation(*args, **kwargs)
    (sql,) = [q["sql"] for q in queries]
    assert sql.startswith(f"SELECT agentstate_{function}("), sql
    return result


def refused_in_one_call(refusal, operation, function: str, *args, **kwargs) -> None:
    with CaptureQueriesContext(connection) as queries, pytest.raises(refusal):
        operation(*args, **kwargs)
    (sql,) = [q["sql"] for q in queries]
    assert sql.startswith(f"SELECT agentstate_{function}("), sql


def test_get_list_is_one_call_whatever_the_length_and_the_outcome(alice):
    context.extend("s", "l", list(range(1000)), owner=alice)
    assert one_call(context.get_list, "get_list", "s", "l", last=3, owner=alice).values == [
        997,
        998,
        999,
    ]
    assert one_call(context.get_list, "get_list", "s", "l", owner="alice").length == 1000
    context.put("s", "n", 1, owner=alice)
    refused_in_one_call(TypeConflict, context.get_list, "get_list", "s", "n", owner=alice)
    refused_in_one_call(VariableNotFound, context.get_list, "get_list", "s", "x", owner=alice)
    refused_in_one_call(ScopeNotFound, context.get_list, "get_list", "t", "x", owner=alice)


def test_extend_is_one_call_new_or_not():
    assert one_call(context.extend, "extend", "s", "l", [1, 2]).length == 2
    assert one_call(context.extend, "extend", "s", "l", [3, 4, 5]).length == 5
    context.put("s", "n", 1)
    refused_in_one_call(TypeConflict, context.extend, "extend", "s", "n", [1])
    assert context.get("s", ["l", "n"]) == {"l": [1, 2, 3, 4, 5], "n": 1}


def test_the_list_endpoint_is_the_token_lookup_and_one_call(alice):
    context.extend("s", "l", [1, 2, 3], owner=alice)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=alice).key}")
    with CaptureQueriesContext(connection) as queries:
        response = api.get("/api/context/list/", {"scope": "s", "name": "l", "last": 2})
    assert response.status_code == 200 and response.json()["values"] == [2, 3]
    sqls = [q["sql"] for q in queries]
    assert len(sqls) == 2 and sqls[1].startswith("SELECT agentstate_get_list("), sqls
