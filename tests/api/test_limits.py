"""Hostile and malformed input on every write endpoint: a 4xx naming the
problem, and not one row changed (docs/rest-api.md, "Conventions").

The endpoints come from the OpenAPI schema, so new ones are covered here
without editing this file; a request is built from each operation's own
request schema and then broken one way at a time.
"""

import io
import json

import pytest
from django.test import Client

from agentstate.conf import agentstate_settings
from agentstate.models import ApprovalRequest, Run
from tests.hardening import (
    body_operations,
    fill_path,
    resolve,
    row_counts,
    sample_body,
    write_operations,
)

pytestmark = pytest.mark.django_db

BODY_OPS = body_operations()
WRITE_OPS = write_operations()
READ_ONLY_FIELDS = (
    "status",
    "question_id",
    "created_at",
    "expires_at",
    "claimed_at",
    "claimed_by",
    "resolved_at",
    "decided_by",
    "decided_at",
    "version",
    "id",
    "created_by",
    "updated_at",
)


def by_id(ops):
    return pytest.mark.parametrize("op", ops, ids=[op.id for op in ops])


CHOICE_FIELDS = ("mode", "decision")  # choices the schema shows as plain strings


def field_cases(kind):
    """(operation, property, schema) for each property of each request body."""
    cases = []
    for op in BODY_OPS:
        for name, node in op.body_schema.get("properties", {}).items():
            node = resolve(node)
            if not node.get("readOnly"):
                cases.append((op, name, node))
    return pytest.mark.parametrize(
        ("op", "prop", "node"),
        [c for c in cases if kind(c[1], c[2])],
        ids=[f"{c[0].id} {c[1]}" for c in cases if kind(c[1], c[2])],
    )


@pytest.fixture
def root(django_user_model):
    # No password: hashing one would dominate the run time of this module.
    return django_user_model.objects.create(username="root", is_staff=True, is_superuser=True)


@pytest.fixture
def world(root):
    """Objects the path parameters name, owned by the caller."""
    run = Run.objects.create(run_id="r1", created_by=root)
    request = ApprovalRequest.objects.create(
        run=run, tool_name="tool", call_id="call-1", created_by=root
    )
    return {"run_id": run.run_id, "id": request.pk, "pk": request.pk, "username": root.username}


@pytest.fixture
def send(api_for, root, world):
    """Send a raw body to an operation; assert a 4xx that stored nothing."""
    client = api_for(root)

    def call(op, body: bytes | str, content_type: str = "application/json", **extra):
        before = row_counts()
        if isinstance(body, str):
            body = body.encode("utf-8", "surrogatepass")
        response = client.generic(
            op.method.upper(), fill_path(op.path, world), body, content_type, **extra
        )
        assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
        payload = response.json()
        assert payload["detail"] and payload["code"], payload
        assert row_counts() == before, "a refused request changed the database"
        return response.status_code, payload

    return call


def body_of(op, **changes) -> str:
    body = sample_body(op.body_schema)
    body.update(changes)
    return json.dumps(body)


def nested(depth: int) -> object:
    """A JSON value whose depth, counting itself as 1, is ``depth``."""
    value: object = 1
    for _ in range(depth - 1):
        value = [value]
    return value


# Size and depth, on every endpoint with a body


@by_id(BODY_OPS)
def test_body_over_the_limit_is_413(send, op):
    limit = agentstate_settings.MAX_BODY_BYTES
    status, payload = send(op, '{"padding": "' + "x" * limit + '"}')
    assert (status, payload["code"]) == (413, "body_too_large")
    assert str(limit) in payload["detail"]


@by_id(BODY_OPS)
def test_chunked_body_over_the_limit_is_413(send, op):
    """No Content-Length (a chunked request the server has de-chunked)."""
    raw = ('{"padding": "' + "x" * agentstate_settings.MAX_BODY_BYTES + '"}').encode()
    status, payload = send(
        op,
        b"",
        CONTENT_LENGTH="",
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input": io.BytesIO(raw), "wsgi.input_terminated": True},
    )
    assert (status, payload["code"]) == (413, "body_too_large")


@by_id(BODY_OPS)
def test_body_nested_deeper_than_the_limit_is_400(send, op):
    limit = agentstate_settings.MAX_JSON_DEPTH
    status, payload = send(op, json.dumps(nested(limit + 1)))
    assert status == 400 and f"nested deeper than {limit} levels" in payload["detail"]


@by_id(BODY_OPS)
def test_hostile_nesting_far_past_the_limit_is_400_not_a_crash(send, op):
    status, payload = send(op, "[" * 200_000 + "]" * 200_000)
    assert status == 400 and payload["code"] == "parse_error"
    assert payload["detail"] == "The request body is nested too deeply to decode."


@pytest.mark.parametrize("operation", ["put", "push"])
def test_depth_exactly_at_the_limit_is_accepted_and_one_more_refused(api, operation):
    """The body's outer object is level 1, so ``value`` may hold limit - 1 levels."""
    limit = agentstate_settings.MAX_JSON_DEPTH
    url = "/api/context/" if operation == "put" else "/api/context/push/"
    method = api.put if operation == "put" else api.post
    ok = method(url, {"scope": "s", "name": "deep", "value": nested(limit - 1)}, format="json")
    assert ok.status_code == 200, ok.json()
    refused = method(url, {"scope": "s", "name": "deeper", "value": nested(limit)}, format="json")
    assert refused.status_code == 400 and "nested deeper" in refused.json()["detail"]
    assert api.get("/api/context/", {"scope": "s"}).json()["values"] == {
        "deep": nested(limit - 1) if operation == "put" else [nested(limit - 1)]
    }


def test_chunked_body_within_the_limit_is_read(api):
    raw = json.dumps({"scope": "s", "name": "n", "value": "chunked"}).encode()
    response = api.generic(
        "PUT",
        "/api/context/",
        b"",
        "application/json",
        CONTENT_LENGTH="",
        **{"wsgi.input": io.BytesIO(raw), "wsgi.input_terminated": True},
    )
    assert response.status_code == 200, response.json()
    assert api.get("/api/context/", {"scope": "s"}).json()["values"] == {"n": "chunked"}


# Malformed JSON and what JSON cannot carry


@by_id(BODY_OPS)
@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ('{"scope": ', "JSON parse error"),
        ('{"a": 1,}', "JSON parse error"),
        ("{'a': 1}", "JSON parse error"),
        (b"\xff\xfe{}", "JSON parse error"),
        ('{"a": NaN}', "NaN is not valid JSON"),
        ('{"a": Infinity}', "Infinity is not valid JSON"),
        ('{"a": -Infinity}', "Infinity is not valid JSON"),
        ('{"a": 1e400}', "must not contain NaN or Infinity"),
        ('{"a": "x\\u0000y"}', "must not contain U+0000"),
        ('{"a": "x\\ud800y"}', "unpaired surrogate"),
        ('{"a\\u0000": 1}', "must not contain U+0000"),
        ('{"a": ["ok", {"b": "\\udfff"}]}', "unpaired surrogate"),
    ],
    ids=[
        "truncated",
        "trailing-comma",
        "single-quotes",
        "not-utf8",
        "nan",
        "infinity",
        "minus-infinity",
        "overflowing-float",
        "nul",
        "lone-surrogate",
        "nul-in-key",
        "nested-surrogate",
    ],
)
def test_malformed_or_unstorable_json_is_400(send, op, raw, says):
    status, payload = send(op, raw)
    assert status == 400 and says in payload["detail"], payload


def test_unstorable_text_deep_in_a_body_names_its_place(api):
    response = api.put(
        "/api/context/",
        '{"scope": "s", "name": "n", "value": {"k": [1, "\\u0000"]}}',
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "value.k.1" and "U+0000" in response.json()["detail"]


@by_id(BODY_OPS)
@pytest.mark.parametrize("raw", ["[]", '"text"', "1", "null", "true"])
def test_body_that_is_not_an_object_is_400(send, op, raw):
    if op.body_schema.get("type") != "object":
        pytest.fail(f"{op.id}: request body is not an object in the schema")
    status, _payload = send(op, raw)
    assert status == 400


@by_id(BODY_OPS)
@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
def test_body_that_is_not_json_is_415(send, op, content_type):
    status, payload = send(op, body_of(op), content_type=content_type)
    assert status == 415 and payload["code"] == "unsupported_media_type"


# Fields: unknown, read-only, wrong type, too long, bad text, unknown modes


@by_id([op for op in BODY_OPS if not op.body_schema.get("additionalProperties")])
def test_unknown_field_is_400_naming_it(send, op):
    status, payload = send(op, body_of(op, unexpected_field=1))
    assert (status, payload["field"]) == (400, "unexpected_field") and "Unknown field" in payload[
        "detail"
    ]


READ_ONLY_CASES = [
    (op, name)
    for op in BODY_OPS
    if not op.body_schema.get("additionalProperties")
    for name in READ_ONLY_FIELDS
    if name not in op.body_schema.get("properties", {})  # e.g. the question_id a claim names
]


@pytest.mark.parametrize(
    ("op", "name"), READ_ONLY_CASES, ids=[f"{op.id} {name}" for op, name in READ_ONLY_CASES]
)
def test_read_only_field_is_refused_as_unknown(send, op, name):
    status, payload = send(op, body_of(op, **{name: "2000-01-01T00:00:00Z"}))
    assert (status, payload["field"]) == (400, name)


def wrong_values(node: dict) -> list:
    kind = node.get("type")
    if "enum" in node or kind == "string":
        return [12345, True, ["x"], {"x": 1}]
    if kind == "integer":
        return ["1", 1.5, True, [1]]
    if kind == "boolean":
        return ["true", 1, None if not node.get("nullable") else "yes"]
    if kind == "object":
        return ["x", [1]]
    if kind == "array":
        return ["x", {"x": 1}]
    return []


@field_cases(lambda name, node: bool(wrong_values(node)))
def test_wrong_type_is_400_naming_the_field(send, op, prop, node):
    for value in wrong_values(node):
        status, payload = send(op, body_of(op, **{prop: value}))
        assert (status, payload.get("field")) == (400, prop), (value, payload)


@field_cases(lambda name, node: node.get("type") == "string" and "maxLength" in node)
def test_over_long_text_is_400_naming_the_field(send, op, prop, node):
    status, payload = send(op, body_of(op, **{prop: "k" * (node["maxLength"] + 1)}))
    assert (status, payload.get("field")) == (400, prop), payload


@field_cases(
    lambda name, node: node.get("type") == "string"
    and "enum" not in node
    and node.get("format") != "uuid"
)
@pytest.mark.parametrize(
    ("text", "says"), [("a\x00b", "U+0000"), ("a\ud800b", "unpaired surrogate")]
)
def test_unstorable_text_is_400_naming_the_field(send, op, prop, node, text, says):
    status, payload = send(op, body_of(op, **{prop: text}))
    assert (status, payload.get("field")) == (400, prop) and says in payload["detail"], payload


@field_cases(
    lambda name, node: "enum" in node or node.get("format") == "uuid" or name in CHOICE_FIELDS
)
def test_value_outside_the_choices_is_400_naming_the_field(send, op, prop, node):
    status, payload = send(op, body_of(op, **{prop: "sideways"}))
    assert (status, payload.get("field")) == (400, prop), payload


@field_cases(lambda name, node: node.get("type") == "integer")
@pytest.mark.parametrize("value", [-1, 2**63, 10**30, -(10**30)])
def test_out_of_range_integer_is_a_4xx_never_a_5xx(send, op, prop, node, value):
    if value == -1 and node.get("minimum", -1) <= -1:
        pytest.fail(f"{op.id} {prop}: negative integers are allowed; say why in the schema")
    send(op, body_of(op, **{prop: value}))


@pytest.mark.parametrize("mode", ["sideways", "", "lifo ", 1, None])
def test_unknown_pop_mode_is_400_naming_mode(api, mode):
    api.post("/api/context/push/", {"scope": "s", "name": "n", "value": 1}, format="json")
    before = row_counts()
    response = api.post(
        "/api/context/pop/", {"scope": "s", "name": "n", "mode": mode}, format="json"
    )
    assert response.status_code == 400 and response.json()["field"] == "mode", response.json()
    assert row_counts() == before
    assert api.get("/api/context/", {"scope": "s"}).json()["values"] == {"n": [1]}


# Query strings of the write endpoints (DELETE)


@by_id([op for op in WRITE_OPS if op.parameters("query")])
def test_unknown_query_parameter_is_400(send, op):
    query = {p["name"]: "x" for p in op.parameters("query") if p.get("required")}
    query["unexpected"] = "1"
    status, payload = send(op, b"", QUERY_STRING="&".join(f"{k}={v}" for k, v in query.items()))
    assert (status, payload.get("field")) == (400, "unexpected")


@by_id([op for op in WRITE_OPS if op.parameters("query")])
@pytest.mark.parametrize(("text", "says"), [("k" * 256, "255"), ("a%00b", "U+0000")])
def test_bad_query_text_is_400_naming_the_parameter(send, op, text, says):
    names = [
        p["name"] for p in op.parameters("query") if resolve(p["schema"]).get("type") == "string"
    ]
    for name in names:
        query = {p["name"]: "x" for p in op.parameters("query") if p.get("required")}
        query[name] = text
        status, payload = send(op, b"", QUERY_STRING="&".join(f"{k}={v}" for k, v in query.items()))
        assert (status, payload.get("field")) == (400, name) and says in payload["detail"], payload


def test_every_write_endpoint_is_covered():
    """The map is read from the schema; a write endpoint without a JSON body must take a
    query, or be a delete of the object its path names."""
    assert BODY_OPS, "no write endpoint found in the schema"
    for op in WRITE_OPS:
        by_path = op.method == "delete" and "{" in op.path
        assert (
            op.body_schema is not None or op.parameters("query") or op.method == "post" or by_path
        ), op.id
    Client()  # the schema was read in-process, no server needed
