"""The function tools: OpenAI-format schemas and a dispatcher that never raises."""

import json
import tempfile
from pathlib import Path

import jsonschema
import pytest
from django.db import connection

from agentstate import tools
from agentstate.models import Scope, Variable
from agentstate.services import context

pytestmark = pytest.mark.django_db


def call(name, arguments, scope="s", **kwargs) -> str:
    message = tools.dispatch(name, arguments, scope=scope, **kwargs)
    assert isinstance(message, str) and message
    return message


def test_schemas_are_openai_function_tools():
    assert [schema["function"]["name"] for schema in tools.SCHEMAS] == [
        tools.PUT,
        tools.GET,
        tools.PUSH,
        tools.POP,
    ]
    for schema in tools.SCHEMAS:
        assert schema["type"] == "function"
        function = schema["function"]
        assert function["description"]
        parameters = function["parameters"]
        assert parameters["type"] == "object"
        assert set(parameters["required"]) <= set(parameters["properties"])
        json.dumps(schema)  # plain JSON


def test_schemas_validate_the_arguments_they_describe():
    by_name = {
        schema["function"]["name"]: schema["function"]["parameters"] for schema in tools.SCHEMAS
    }
    jsonschema.validate({"name": "x", "value": {"any": [1]}}, by_name[tools.PUT])
    jsonschema.validate({"names": ["a", "b"]}, by_name[tools.GET])
    jsonschema.validate({}, by_name[tools.GET])
    jsonschema.validate({"name": "x", "mode": "FIFO"}, by_name[tools.POP])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "x", "mode": "RANDOM"}, by_name[tools.POP])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"value": 1}, by_name[tools.PUSH])


def test_put_and_get():
    assert call(tools.PUT, {"name": "x", "value": {"a": 1}}) == "variable x set"
    assert json.loads(call(tools.GET, {"names": ["x", "y"]})) == {"x": {"a": 1}, "y": None}
    assert json.loads(call(tools.GET, {})) == {"x": {"a": 1}}


def test_arguments_may_be_a_json_string():
    assert call(tools.PUT, '{"name": "x", "value": [1, 2]}') == "variable x set"
    assert json.loads(call(tools.GET, "")) == {"x": [1, 2]}
    assert call(tools.POP, '{"name": "x", "mode": "fifo"}') == "1"


def test_get_in_a_scope_never_written_answers_nulls():
    assert json.loads(call(tools.GET, {"names": ["a"]}, scope="fresh")) == {"a": None}
    assert json.loads(call(tools.GET, None, scope="fresh")) == {}


def test_push_and_pop_messages():
    assert (
        call(tools.PUSH, {"name": "todo", "value": "a"})
        == "value pushed; variable todo now holds 1 element"
    )
    assert (
        call(tools.PUSH, {"name": "todo", "value": {"b": 2}})
        == "value pushed; variable todo now holds 2 elements"
    )
    assert call(tools.POP, {"name": "todo"}) == '{"b": 2}'
    assert call(tools.POP, {"name": "todo"}) == "a"  # a popped string comes back as it is
    assert call(tools.POP, {"name": "todo"}) == "no variable todo in scope s"


def test_pop_in_an_unknown_scope():
    assert call(tools.POP, {"name": "x"}, scope="nowhere") == "no variable x in scope nowhere"


def test_type_conflicts_are_messages_and_change_nothing():
    call(tools.PUT, {"name": "n", "value": 5})
    message = call(tools.PUSH, {"name": "n", "value": 1})
    assert message.startswith("error:") and "number" in message
    assert call(tools.POP, {"name": "n"}).startswith("error:")
    assert context.get("s", ["n"]) == {"n": 5}
    assert Variable.objects.get().version == 1


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        (tools.PUT, {"name": "x"}, "missing argument 'value'"),
        (tools.PUT, {"value": 1}, "missing argument 'name'"),
        (tools.PUT, {"name": "x", "value": 1, "extra": 2}, "unknown argument 'extra'"),
        (tools.PUT, {"name": 5, "value": 1}, "name must be a string"),
        (tools.PUT, {"name": "", "value": 1}, "name must be 1 to 255"),
        (tools.PUT, {"name": "n" * 256, "value": 1}, "name must be 1 to 255"),
        (tools.PUT, {"name": "x", "value": float("nan")}, "NaN"),
        (tools.PUT, '{"name": "x", "value": NaN}', "NaN"),
        (tools.PUT, '{"name": "x", "value": "\\ud800"}', "surrogate"),
        (tools.PUT, "{broken", "not valid JSON"),
        (tools.PUT, "[1, 2]", "must be a JSON object"),
        (tools.PUT, 42, "must be a JSON object"),
        (tools.PUT, "[" * 100_000 + "]" * 100_000, "invalid arguments"),
        (tools.GET, {"names": "x"}, "names must be a list"),
        (tools.GET, {"names": [1]}, "names must be a string"),
        (tools.POP, {"name": "x", "mode": "RANDOM"}, "mode must be"),
        (tools.POP, {"name": "x", "mode": None}, "mode must be"),
        (tools.POP, {}, "missing argument 'name'"),
    ],
)
def test_bad_arguments_are_messages_and_store_nothing(name, arguments, expected):
    message = call(name, arguments)
    assert message.startswith("error: invalid arguments"), message
    assert expected in message, message
    assert not Scope.objects.exists()


@pytest.mark.parametrize("name", ["delete_everything", "", None, 3, "PUT_CONTEXT_VARIABLE"])
def test_an_unknown_tool_is_a_message(name):
    message = call(name, {"name": "x", "value": 1})
    assert message.startswith("error: unknown tool") and tools.PUT in message
    assert not Scope.objects.exists()


def test_a_bad_scope_from_the_host_is_a_message():
    assert call(tools.PUT, {"name": "x", "value": 1}, scope="").startswith("error:")


def test_owner_and_actor_are_passed_through(alice):
    call(tools.PUSH, {"name": "x", "value": 1}, owner=alice, actor="conv-1")
    variable = Variable.objects.get()
    assert variable.scope.owner == alice and variable.updated_by == "conv-1"
    assert call(tools.POP, {"name": "x"}) == "no variable x in scope s"  # not the site's scope


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_store_is_a_message():
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "postgresql":
        connection.settings_dict.update(HOST="127.0.0.1", PORT="1")
    else:
        connection.settings_dict["NAME"] = str(
            Path(tempfile.gettempdir()) / "no-such-dir" / "db.sqlite3"
        )
    try:
        for name, arguments in [
            (tools.PUT, {"name": "x", "value": 1}),
            (tools.GET, {}),
            (tools.POP, {"name": "x"}),
        ]:
            assert "unavailable" in call(name, arguments)
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    assert not Scope.objects.exists()
