"""Reading a list's last elements (``get_list``) and appending many at once (``extend``),
through the Python API and over REST (docs/python-api.md, docs/rest-api.md)."""

import pytest

from agentstate.exceptions import BadInput, ScopeNotFound, TypeConflict, VariableNotFound
from agentstate.models import Element, Variable
from agentstate.services import context

pytestmark = pytest.mark.django_db

LIST = "/api/context/list/"


def error(response, status: int, code: str, field: str | None = None) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code and body["detail"], body
    if field is not None:
        assert body["field"] == field, body
    return body


# get_list


def test_get_list_reads_the_whole_list_or_its_last_elements_in_order():
    context.put("s", "l", [1, "two", {"three": 3}, [4], None])
    whole = context.get_list("s", "l")
    assert (whole.scope, whole.name, whole.values, whole.length) == (
        "s",
        "l",
        [1, "two", {"three": 3}, [4], None],
        5,
    )
    assert context.get_list("s", "l", last=2).values == [[4], None]
    assert context.get_list("s", "l", last=1).values == [None]
    last = context.get_list("s", "l", last=99)
    assert (last.values, last.length) == ([1, "two", {"three": 3}, [4], None], 5)
    assert context.get_list("s", "l", last=2**63 - 1).length == 5


def test_get_list_follows_pushes_and_pops_at_both_ends():
    for i in range(6):
        context.push("s", "l", i)
    context.pop("s", "l", "FIFO")
    context.pop("s", "l", "FIFO")
    context.pop("s", "l", "LIFO")
    assert context.get_list("s", "l").values == [2, 3, 4]
    assert context.get_list("s", "l", last=2).values == [3, 4]
    assert context.get_list("s", "l", last=5).length == 3
    context.push("s", "l", 9)
    assert context.get_list("s", "l", last=2).values == [4, 9]


def test_get_list_of_an_empty_list_and_of_a_string():
    context.put("s", "empty", [])
    assert (context.get_list("s", "empty").values, context.get_list("s", "empty").length) == (
        [],
        0,
    )
    assert context.get_list("s", "empty", last=3).values == []
    context.put("s", "text", "hello")
    one = context.get_list("s", "text", last=3)
    assert (one.values, one.length) == (["hello"], 1)


@pytest.mark.parametrize("value", [0, 1.5, True, None, {"a": 1}])
def test_get_list_of_any_other_value_is_a_type_conflict(value):
    context.put("s", "x", value)
    with pytest.raises(TypeConflict) as refused:
        context.get_list("s", "x")
    assert "which get_list cannot take" in refused.value.detail


def test_get_list_of_an_absent_variable_or_scope():
    with pytest.raises(ScopeNotFound):
        context.get_list("nowhere", "l")
    context.put("s", "other", 1)
    with pytest.raises(VariableNotFound):
        context.get_list("s", "l")


@pytest.mark.parametrize("last", [0, -1, True, 1.0, "2", 2**63])
def test_get_list_refuses_a_last_that_is_not_a_positive_integer(last):
    context.put("s", "l", [1, 2])
    with pytest.raises(BadInput) as refused:
        context.get_list("s", "l", last=last)
    assert refused.value.field == "last"


def test_get_list_checks_the_scope_and_name():
    with pytest.raises(BadInput) as refused:
        context.get_list("s", "")
    assert refused.value.field == "name"


def test_get_list_of_another_owners_list_is_its_own(alice, bob):
    context.put("s", "l", [1, 2], owner=alice)
    context.put("s", "l", [3], owner=bob)
    assert context.get_list("s", "l", owner=alice).values == [1, 2]
    assert context.get_list("s", "l", owner="bob").values == [3]
    with pytest.raises(ScopeNotFound):
        context.get_list("s", "l")


# extend


def test_extend_appends_every_value_as_one_element_in_one_version():
    first = context.extend("s", "l", [1, [2, 3], {"four": 4}])
    assert (first.length, first.version) == (3, 1)
    second = context.extend("s", "l", (5, None))
    assert (second.length, second.version) == (5, 2)
    assert context.get("s", ["l"]) == {"l": [1, [2, 3], {"four": 4}, 5, None]}
    assert Element.objects.count() == 5


def test_extend_a_string_and_after_fifo_pops():
    context.put("s", "t", "a")
    assert context.extend("s", "t", ["b", "c"]).length == 3
    assert context.get("s", ["t"]) == {"t": ["a", "b", "c"]}
    context.pop("s", "t", "FIFO")
    context.extend("s", "t", ["d"])
    assert context.get_list("s", "t").values == ["b", "c", "d"]


def test_extend_onto_a_number_is_a_type_conflict_and_changes_nothing():
    context.put("s", "n", 1)
    with pytest.raises(TypeConflict) as refused:
        context.extend("s", "n", [1, 2])
    assert "which extend cannot take" in refused.value.detail
    assert context.get("s", ["n"]) == {"n": 1} and not Element.objects.exists()
    assert Variable.objects.get(name="n").version == 1


@pytest.mark.parametrize("values", [[], (), "ab", {"a": 1}, None, 3])
def test_extend_refuses_anything_but_a_non_empty_list(values):
    with pytest.raises(BadInput) as refused:
        context.extend("s", "l", values)
    assert refused.value.field == "values"
    assert not Variable.objects.exists()


def test_extend_refuses_an_unstorable_value_and_stores_nothing():
    with pytest.raises(BadInput) as refused:
        context.extend("s", "l", [1, {2}])
    assert refused.value.field == "values"
    assert not Variable.objects.exists()


# Over REST


def test_the_list_endpoint_answers_values_and_length(api):
    context.put("s", "l", [1, {"two": 2}, "three"], owner="alice")
    response = api.get(LIST, {"scope": "s", "name": "l", "last": 2})
    assert response.status_code == 200, response.content
    assert response.json() == {
        "scope": "s",
        "name": "l",
        "values": [{"two": 2}, "three"],
        "length": 3,
    }
    whole = api.get(LIST, {"scope": "s", "name": "l"}).json()
    assert (whole["values"], whole["length"]) == ([1, {"two": 2}, "three"], 3)
    context.put("s", "t", "text", owner="alice")
    assert api.get(LIST, {"scope": "s", "name": "t"}).json()["values"] == ["text"]


def test_the_list_endpoint_errors_are_those_of_a_context_read(api):
    error(api.get(LIST, {"scope": "nowhere", "name": "l"}), 404, "scope_not_found")
    context.put("s", "n", 1, owner="alice")
    error(api.get(LIST, {"scope": "s", "name": "l"}), 404, "variable_not_found")
    error(api.get(LIST, {"scope": "s", "name": "n"}), 409, "type_conflict")


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"name": "l"}, "scope"),
        ({"scope": "s"}, "name"),
        ({"scope": "s", "name": ""}, "name"),
        ({"scope": "s", "name": "n" * 256}, "name"),
        ({"scope": "s", "name": "l", "last": "0"}, "last"),
        ({"scope": "s", "name": "l", "last": "-1"}, "last"),
        ({"scope": "s", "name": "l", "last": "+1"}, "last"),
        ({"scope": "s", "name": "l", "last": "1.0"}, "last"),
        ({"scope": "s", "name": "l", "last": " 1"}, "last"),
        ({"scope": "s", "name": "l", "last": "x"}, "last"),
        ({"scope": "s", "name": "l", "last": ""}, "last"),
        ({"scope": "s", "name": "l", "last": "٣"}, "last"),
        ({"scope": "s", "name": "l", "last": str(2**63)}, "last"),
        ({"scope": "s", "name": "l", "last": "9" * 400}, "last"),
        ({"scope": "s", "name": "l", "unknown": "1"}, "unknown"),
    ],
)
def test_bad_list_queries_are_400_naming_the_field(api, params, field):
    context.put("s", "l", [1], owner="alice")
    error(api.get(LIST, params), 400, "invalid", field)


def test_a_list_query_parameter_given_twice_is_400(api):
    context.put("s", "l", [1], owner="alice")
    error(api.get(f"{LIST}?scope=s&name=l&last=1&last=2"), 400, "invalid", "last")


def test_the_list_endpoint_is_in_the_openapi_schema(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"][LIST]["get"]
    assert operation["operationId"] == "context_list"
    assert {p["name"] for p in operation["parameters"]} >= {"scope", "name", "last", "owner"}
    assert {"200", "400", "404", "409"} <= set(operation["responses"])
