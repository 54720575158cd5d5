"""The context and scope endpoints of docs/rest-api.md: codes, isolation, bad input."""

import json

import pytest

from agentstate.models import Element, Scope, Variable
from agentstate.services import context

pytestmark = pytest.mark.django_db

CONTEXT, PUSH, POP, SCOPES = (
    "/api/context/",
    "/api/context/push/",
    "/api/context/pop/",
    "/api/scopes/",
)


def send(api, method: str, url: str, body):
    return getattr(api, method)(url, body, format="json")


def error(response, status: int, code: str, field: str | None = None) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code, body
    assert body["detail"]
    if field is not None:
        assert body["field"] == field, body
    return body


def nothing_stored() -> None:
    assert (
        not Scope.objects.exists()
        and not Variable.objects.exists()
        and not Element.objects.exists()
    )


# Success shapes


def test_put_answers_the_stored_variable(api, alice):
    response = send(api, "put", CONTEXT, {"scope": "s", "name": "x", "value": {"a": [1, None]}})
    assert response.status_code == 200
    assert response.json() == {"scope": "s", "name": "x", "value": {"a": [1, None]}, "version": 1}
    assert context.get("s", ["x"], owner=alice) == {"x": {"a": [1, None]}}
    assert Variable.objects.get().updated_by == "alice"


def test_put_with_if_version(api):
    send(api, "put", CONTEXT, {"scope": "s", "name": "x", "value": 1})
    ok = send(api, "put", CONTEXT, {"scope": "s", "name": "x", "value": 2, "if_version": 1})
    assert ok.status_code == 200 and ok.json()["version"] == 2
    stale = send(api, "put", CONTEXT, {"scope": "s", "name": "x", "value": 3, "if_version": 1})
    error(stale, 412, "version_mismatch")
    error(
        send(api, "put", CONTEXT, {"scope": "s", "name": "x", "value": 3, "if_version": 0}),
        412,
        "version_mismatch",
    )
    assert api.get(CONTEXT, {"scope": "s"}).json()["values"] == {"x": 2}
    created = send(api, "put", CONTEXT, {"scope": "s", "name": "new", "value": 0, "if_version": 0})
    assert created.status_code == 200 and created.json()["version"] == 1


def test_get_names_some_or_all(api):
    send(api, "put", CONTEXT, {"scope": "s", "name": "a", "value": "A"})
    send(api, "post", PUSH, {"scope": "s", "name": "b", "value": 1})
    some = api.get(CONTEXT, {"scope": "s", "name": ["a", "missing"]})
    assert some.status_code == 200
    assert some.json() == {"scope": "s", "values": {"a": "A", "missing": None}}
    assert api.get(CONTEXT, {"scope": "s"}).json() == {"scope": "s", "values": {"a": "A", "b": [1]}}


def test_get_of_an_unknown_scope_is_404(api):
    error(api.get(CONTEXT, {"scope": "nowhere"}), 404, "scope_not_found")


def test_push_answers_length_and_version(api):
    first = send(api, "post", PUSH, {"scope": "s", "name": "x", "value": "a"})
    assert first.status_code == 200
    assert first.json() == {"scope": "s", "name": "x", "length": 1, "version": 1}
    second = send(api, "post", PUSH, {"scope": "s", "name": "x", "value": None})
    assert second.json() == {"scope": "s", "name": "x", "length": 2, "version": 2}


def test_push_onto_a_number_is_409_and_changes_nothing(api):
    send(api, "put", CONTEXT, {"scope": "s", "name": "x", "value": 5})
    error(send(api, "post", PUSH, {"scope": "s", "name": "x", "value": 1}), 409, "type_conflict")
    assert api.get(CONTEXT, {"scope": "s"}).json()["values"] == {"x": 5}
    assert Variable.objects.get().version == 1


def test_pop_answers_the_value_lifo_by_default(api):
    send(api, "put", CONTEXT, {"scope": "s", "name": "x", "value": [1, 2, "c"]})
    response = send(api, "post", POP, {"scope": "s", "name": "x"})
    assert response.status_code == 200
    assert response.json() == {"scope": "s", "name": "x", "value": "c"}
    assert send(api, "post", POP, {"scope": "s", "name": "x", "mode": "fifo"}).json()["value"] == 1
    assert api.get(CONTEXT, {"scope": "s"}).json()["values"] == {"x": [2]}


def test_pop_answers_a_popped_null(api):
    send(api, "put", CONTEXT, {"scope": "s", "name": "x", "value": [None, None]})
    response = send(api, "post", POP, {"scope": "s", "name": "x"})
    assert response.status_code == 200 and response.json()["value"] is None


def test_pop_errors(api):
    error(send(api, "post", POP, {"scope": "nowhere", "name": "x"}), 404, "scope_not_found")
    send(api, "put", CONTEXT, {"scope": "s", "name": "n", "value": 1})
    error(send(api, "post", POP, {"scope": "s", "name": "x"}), 404, "variable_not_found")
    error(send(api, "post", POP, {"scope": "s", "name": "n"}), 409, "type_conflict")
    send(api, "put", CONTEXT, {"scope": "s", "name": "empty", "value": []})
    error(send(api, "post", POP, {"scope": "s", "name": "empty"}), 409, "type_conflict")
    error(
        send(api, "post", POP, {"scope": "s", "name": "n", "mode": "RANDOM"}),
        400,
        "invalid",
        "mode",
    )
    error(send(api, "post", POP, {"scope": "s", "name": "n", "mode": 1}), 400, "invalid", "mode")
    assert api.get(CONTEXT, {"scope": "s"}).json()["values"] == {"n": 1, "empty": []}


def test_delete_variable(api):
    send(api, "put", CONTEXT, {"scope": "s", "name": "x", "value": [1, 2]})
    response = api.delete(CONTEXT + "?scope=s&name=x")
    assert response.status_code == 204 and not response.content
    error(api.delete(CONTEXT + "?scope=s&name=x"), 404, "variable_not_found")
    error(api.delete(CONTEXT + "?scope=nowhere&name=x"), 404, "scope_not_found")
    error(api.delete(CONTEXT + "?scope=s"), 400, "invalid", "name")
    assert not Element.objects.exists()


def test_scopes_list_and_delete(api):
    for key in ("proj/a", "proj/b", "other"):
        send(api, "put", CONTEXT, {"scope": key, "name": "x", "value": 1})
    send(api, "put", CONTEXT, {"scope": "proj/a", "name": "y", "value": 2})
    listing = api.get(SCOPES)
    assert listing.status_code == 200
    body = listing.json()
    assert body["count"] == 3 and body["next"] is None and body["previous"] is None
    assert [(r["scope"], r["owner"], r["variables"]) for r in body["results"]] == [
        ("other", "alice", 1),
        ("proj/a", "alice", 2),
        ("proj/b", "alice", 1),
    ]
    assert all(r["created_at"] for r in body["results"])
    prefixed = api.get(SCOPES, {"prefix": "proj/"}).json()
    assert [r["scope"] for r in prefixed["results"]] == ["proj/a", "proj/b"]
    assert api.delete(SCOPES + "?scope=proj/a").status_code == 204
    error(api.delete(SCOPES + "?scope=proj/a"), 404, "scope_not_found")
    assert [r["scope"] for r in api.get(SCOPES).json()["results"]] == ["other", "proj/b"]


def test_scopes_are_paginated(api):
    for i in range(5):
        send(api, "put", CONTEXT, {"scope": f"s{i}", "name": "x", "value": i})
    page = api.get(SCOPES, {"page_size": 2}).json()
    assert page["count"] == 5 and len(page["results"]) == 2 and page["next"]


def test_anonymous_is_401(api_for):
    anonymous = api_for(None)
    error(anonymous.get(CONTEXT, {"scope": "s"}), 401, "not_authenticated")
    error(
        send(anonymous, "post", PUSH, {"scope": "s", "name": "x", "value": 1}),
        401,
        "not_authenticated",
    )
    nothing_stored()


# Isolation between users


def test_two_users_default_scopes_are_two_scopes(api_for, alice, bob):
    send(api_for(alice), "put", CONTEXT, {"scope": "default", "name": "x", "value": "alice's"})
    send(api_for(bob), "put", CONTEXT, {"scope": "default", "name": "x", "value": "bob's"})
    assert api_for(alice).get(CONTEXT, {"scope": "default"}).json()["values"] == {"x": "alice's"}
    assert api_for(bob).get(CONTEXT, {"scope": "default"}).json()["values"] == {"x": "bob's"}
    assert Scope.objects.filter(key="default").count() == 2


def test_another_users_scope_answers_404_everywhere(api_for, alice, bob):
    send(
        api_for(alice), "put", CONTEXT, {"scope": "private", "name": "x", "value": ["secret", "s2"]}
    )
    other = api_for(bob)
    error(other.get(CONTEXT, {"scope": "private"}), 404, "scope_not_found")
    error(send(other, "post", POP, {"scope": "private", "name": "x"}), 404, "scope_not_found")
    error(other.delete(CONTEXT + "?scope=private&name=x"), 404, "scope_not_found")
    error(other.delete(SCOPES + "?scope=private"), 404, "scope_not_found")
    assert other.get(SCOPES).json()["count"] == 0
    assert context.get("private", ["x"], owner=alice) == {"x": ["secret", "s2"]}


@pytest.mark.parametrize("exists", [True, False])
def test_naming_an_owner_without_the_permission_is_403(api_for, alice, bob, exists):
    if exists:
        context.put("private", "x", [1, 2], owner=alice)
    other = api_for(bob)
    error(other.get(CONTEXT, {"scope": "private", "owner": "alice"}), 403, "permission_denied")
    error(
        send(
            other, "put", CONTEXT, {"scope": "private", "name": "x", "value": 0, "owner": "alice"}
        ),
        403,
        "permission_denied",
    )
    error(
        send(other, "post", PUSH, {"scope": "private", "name": "x", "value": 0, "owner": "alice"}),
        403,
        "permission_denied",
    )
    error(
        send(other, "post", POP, {"scope": "private", "name": "x", "owner": "alice"}),
        403,
        "permission_denied",
    )
    error(other.delete(CONTEXT + "?scope=private&name=x&owner=alice"), 403, "permission_denied")
    error(other.get(SCOPES, {"owner": "alice"}), 403, "permission_denied")
    error(other.delete(SCOPES + "?scope=private&owner=alice"), 403, "permission_denied")
    assert Scope.objects.filter(owner=bob).count() == 0
    if exists:
        assert context.get("private", ["x"], owner=alice) == {"x": [1, 2]}


def test_view_scope_reads_but_does_not_write_another_owners_scope(api_for, alice, make_user):
    context.put("private", "x", [1, 2], owner=alice)
    reader = api_for(make_user("reader", "agentstate.view_scope"))
    assert reader.get(CONTEXT, {"scope": "private", "owner": "alice"}).json()["values"] == {
        "x": [1, 2]
    }
    assert reader.get(SCOPES, {"owner": "alice"}).json()["count"] == 1
    assert reader.get(SCOPES).json()["count"] == 1  # every user's scopes
    error(
        send(reader, "post", POP, {"scope": "private", "name": "x", "owner": "alice"}),
        403,
        "permission_denied",
    )


def test_change_scope_writes_another_owners_scope(api_for, alice, make_user):
    context.put("private", "x", [1, 2], owner=alice)
    agent = api_for(make_user("agent", "agentstate.change_scope"))
    assert (
        send(
            agent, "post", PUSH, {"scope": "private", "name": "x", "value": 3, "owner": "alice"}
        ).json()["length"]
        == 3
    )
    assert (
        send(agent, "post", POP, {"scope": "private", "name": "x", "owner": "alice"}).json()[
            "value"
        ]
        == 3
    )
    put = send(agent, "put", CONTEXT, {"scope": "new", "name": "y", "value": 1, "owner": "alice"})
    assert put.status_code == 200
    assert Scope.objects.get(key="new").owner == alice
    assert Variable.objects.get(name="y").updated_by == "agent"
    assert agent.delete(CONTEXT + "?scope=private&name=x&owner=alice").status_code == 204
    assert agent.delete(SCOPES + "?scope=new&owner=alice").status_code == 204
    assert context.get("private", owner=alice) == {}


def test_naming_yourself_as_owner_needs_no_permission(api):
    assert (
        send(
            api, "put", CONTEXT, {"scope": "s", "name": "x", "value": 1, "owner": "alice"}
        ).status_code
        == 200
    )
    assert api.get(CONTEXT, {"scope": "s", "owner": "alice"}).json()["values"] == {"x": 1}


# Bad input: 400, nothing stored


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "value": 1}, "scope"),
        ({"scope": "s", "value": 1}, "name"),
        ({"scope": "s", "name": "x"}, "value"),
        ({"scope": 5, "name": "x", "value": 1}, "scope"),
        ({"scope": "s", "name": ["x"], "value": 1}, "name"),
        ({"scope": "", "name": "x", "value": 1}, "scope"),
        ({"scope": "s" * 256, "name": "x", "value": 1}, "scope"),
        ({"scope": "s", "name": "n" * 256, "value": 1}, "name"),
        ({"scope": "a\u0000b", "name": "x", "value": 1}, "scope"),
        ({"scope": "s", "name": "x", "value": 1, "extra": True}, "extra"),
        ({"scope": "s", "name": "x", "value": 1, "owner": 7}, "owner"),
    ],
)
@pytest.mark.parametrize("url", [CONTEXT, PUSH])
def test_bad_bodies_are_400_naming_the_field(api, url, body, field):
    method = "put" if url == CONTEXT else "post"
    error(send(api, method, url, body), 400, "invalid", field)
    nothing_stored()


@pytest.mark.parametrize("if_version", ["1", 1.5, True, -1])
def test_bad_if_version_is_400(api, if_version):
    body = {"scope": "s", "name": "x", "value": 1, "if_version": if_version}
    error(send(api, "put", CONTEXT, body), 400, "invalid", "if_version")
    nothing_stored()


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json", "parse_error"),
        (b"", "invalid"),  # no body: the required fields are missing
        (b'{"scope": "s", "name": "x", "value": NaN}', "parse_error"),
        (b'{"scope": "s", "name": "x", "value": Infinity}', "parse_error"),
        (b'{"scope": "s", "name": "x", "value": "\\ud800"}', "invalid"),
        (b'{"scope": "s", "name": "\\udc00", "value": 1}', "invalid"),
        (b'{"scope": "s", "name": "x", "value": {"k": "\\u0000"}}', "invalid"),
        (b'{"scope": "s", "name": "x", "value": 1', "parse_error"),
        (b'["scope", "s"]', "invalid"),
        (b"\xff\xfe", "parse_error"),
    ],
)
@pytest.mark.parametrize("url", [CONTEXT, PUSH, POP])
def test_malformed_and_unstorable_json_is_400(api, url, raw, code):
    method = "PUT" if url == CONTEXT else "POST"
    response = api.generic(method, url, raw, content_type="application/json")
    error(response, 400, code)
    nothing_stored()


def test_unstorable_value_names_the_field(api):
    response = api.generic(
        "PUT",
        CONTEXT,
        b'{"scope": "s", "name": "x", "value": ["ok", "\\ud800"]}',
        content_type="application/json",
    )
    body = error(response, 400, "invalid")
    assert body["field"].startswith("value")
    nothing_stored()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "scope"),
        ({"scope": ""}, "scope"),
        ({"scope": "s" * 256}, "scope"),
        ({"scope": "s", "name": "n" * 256}, "name"),
        ({"scope": "s", "unknown": "1"}, "unknown"),
        ({"scope": "a\u0000b"}, "scope"),
    ],
)
def test_bad_queries_are_400(api, params, field):
    send(api, "put", CONTEXT, {"scope": "s", "name": "x", "value": 1})
    body = error(api.get(CONTEXT, params), 400, "invalid")
    assert body["field"].split(".")[0] == field


def test_unsupported_media_type_is_refused_without_storing(api):
    response = api.generic(
        "PUT", CONTEXT, "scope=s&name=x&value=1", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415
    nothing_stored()


def test_values_keep_their_json_types_over_rest(api):
    value = {
        "int": 1,
        "float": 1.5,
        "big": 2**60,
        "bool": False,
        "null": None,
        "text": "é ✓",
        "list": [[], {}],
    }
    send(api, "put", CONTEXT, {"scope": "s", "name": "x", "value": value})
    raw = api.get(CONTEXT, {"scope": "s"}).content
    assert json.loads(raw)["values"]["x"] == value
