"""Every rule of docs/concepts.md's context variables, through the Python API (services)."""

import pytest

from agentstate.exceptions import (
    BadInput,
    ScopeNotFound,
    TypeConflict,
    VariableNotFound,
    VersionMismatch,
)
from agentstate.models import Element, Scope, Variable
from agentstate.services import context

pytestmark = pytest.mark.django_db


def stored(scope: str, name: str, owner=None) -> Variable:
    return Variable.objects.get(scope__key=scope, scope__owner=owner, name=name)


# put


def test_put_creates_the_scope_and_stores_the_value_at_version_1():
    result = context.put("s", "x", {"a": [1, 2.5, None, True]})
    assert (result.scope, result.name, result.value, result.version) == (
        "s",
        "x",
        {"a": [1, 2.5, None, True]},
        1,
    )
    assert Scope.objects.filter(key="s", owner=None).exists()
    assert context.get("s", ["x"]) == {"x": {"a": [1, 2.5, None, True]}}


@pytest.mark.parametrize(
    "value", ["text", "", 0, -7, 1.5, True, False, None, {}, {"k": "v"}, [], [1, "a"], "[1, 2]"]
)
def test_put_stores_any_json_value_as_it_is(value):
    context.put("s", "x", value)
    assert context.get("s", ["x"])["x"] == value
    assert type(context.get("s", ["x"])["x"]) is type(value)


def test_put_keeps_a_list_as_elements_and_replaces_them():
    context.put("s", "x", [1, 2, 3])
    assert stored("s", "x").is_list and Element.objects.count() == 3
    context.put("s", "x", "plain")
    assert Element.objects.count() == 0
    assert context.get("s", ["x"]) == {"x": "plain"}


def test_put_accepts_a_tuple_as_a_list():
    context.put("s", "x", (1, 2))
    assert context.push("s", "x", 3).length == 3
    assert context.get("s", ["x"]) == {"x": [1, 2, 3]}


def test_every_change_grows_the_version_by_one():
    assert context.put("s", "x", "a").version == 1
    assert context.push("s", "x", "b").version == 2
    assert context.push("s", "x", "c").version == 3
    context.pop("s", "x")
    assert stored("s", "x").version == 4
    context.pop("s", "x", "FIFO")  # collapses to "b": still one change
    assert stored("s", "x").version == 5
    assert context.put("s", "x", 1).version == 6


def test_put_with_matching_if_version_succeeds():
    context.put("s", "x", 1)
    assert context.put("s", "x", 2, if_version=1).version == 2


def test_put_with_stale_if_version_is_refused_and_changes_nothing():
    context.put("s", "x", 1)
    context.put("s", "x", 2)
    with pytest.raises(VersionMismatch):
        context.put("s", "x", 3, if_version=1)
    variable = stored("s", "x")
    assert (variable.value, variable.version) == (2, 2)


def test_if_version_0_means_must_not_exist():
    assert context.put("s", "x", "first", if_version=0).version == 1
    with pytest.raises(VersionMismatch):
        context.put("s", "x", "second", if_version=0)
    assert context.get("s", ["x"]) == {"x": "first"}


def test_if_version_on_an_absent_variable_is_refused_and_creates_nothing():
    with pytest.raises(VersionMismatch):
        context.put("new", "x", 1, if_version=3)
    assert not Scope.objects.exists() and not Variable.objects.exists()


@pytest.mark.parametrize("bad", [-1, 1.0, "1", True])
def test_if_version_must_be_a_non_negative_integer(bad):
    with pytest.raises(BadInput) as caught:
        context.put("s", "x", 1, if_version=bad)
    assert caught.value.field == "if_version"


@pytest.mark.parametrize(
    "value, says",
    [({"plan": object()}, "holds an object,"), ({"plan": {1, 2}}, "holds a set,")],
)
def test_a_value_that_is_not_json_is_named_in_plain_words(value, says):
    with pytest.raises(BadInput) as caught:
        context.put("s", "x", value)
    assert says in caught.value.detail and "plan" in caught.value.detail
    assert not Variable.objects.exists()


# get


def test_get_has_an_entry_for_every_requested_name_none_when_absent():
    context.put("s", "a", 1)
    context.put("s", "b", [1, 2])
    assert context.get("s", ["a", "b", "missing"]) == {"a": 1, "b": [1, 2], "missing": None}


def test_get_without_names_returns_every_variable():
    context.put("s", "a", 1)
    context.push("s", "b", "x")
    context.put("other", "c", 3)
    assert context.get("s") == {"a": 1, "b": ["x"]}
    assert context.get("s", []) == {"a": 1, "b": ["x"]}


def test_get_of_an_unknown_scope_is_scope_not_found():
    with pytest.raises(ScopeNotFound):
        context.get("nowhere", ["x"])
    with pytest.raises(ScopeNotFound):
        context.get("nowhere")


# push


def test_push_to_an_absent_variable_makes_a_one_element_list():
    result = context.push("s", "x", {"task": 1})
    assert (result.length, result.version) == (1, 1)
    assert context.get("s", ["x"]) == {"x": [{"task": 1}]}


def test_push_creates_the_scope():
    context.push("fresh", "x", 1)
    assert Scope.objects.filter(key="fresh").exists()


def test_push_to_a_string_makes_a_list_of_it_and_the_value():
    context.put("s", "x", "first")
    assert context.push("s", "x", "second").length == 2
    assert context.get("s", ["x"]) == {"x": ["first", "second"]}


def test_push_to_a_list_appends_and_returns_the_new_length():
    context.put("s", "x", [1, 2])
    assert context.push("s", "x", [3]).length == 3
    assert context.get("s", ["x"]) == {"x": [1, 2, [3]]}


def test_push_to_an_empty_list_appends():
    context.put("s", "x", [])
    assert context.push("s", "x", None).length == 1
    assert context.get("s", ["x"]) == {"x": [None]}


@pytest.mark.parametrize("value", [5, 1.5, True, None, {"a": 1}])
def test_push_to_another_type_is_a_type_conflict_and_changes_nothing(value):
    context.put("s", "x", value)
    with pytest.raises(TypeConflict):
        context.push("s", "x", "more")
    variable = stored("s", "x")
    assert (variable.value, variable.version, variable.is_list) == (value, 1, False)
    assert not Element.objects.exists()


# pop


def test_pop_of_a_string_removes_and_returns_it():
    context.put("s", "x", "only")
    assert context.pop("s", "x") == "only"
    assert context.get("s", ["x"]) == {"x": None}


def test_pop_lifo_returns_the_last_and_fifo_the_first():
    context.put("s", "x", [1, 2, 3, 4])
    assert context.pop("s", "x") == 4
    assert context.pop("s", "x", "LIFO") == 3
    assert context.pop("s", "x", "FIFO") == 1
    assert context.get("s", ["x"]) == {"x": [2]}


@pytest.mark.parametrize("mode", ["fifo", "Fifo", "lifo", "LiFo"])
def test_pop_mode_is_case_insensitive(mode):
    context.put("s", "x", [1, 2, 3])
    expected = 1 if mode.upper() == "FIFO" else 3
    assert context.pop("s", "x", mode) == expected


@pytest.mark.parametrize("mode", ["STACK", "", " LIFO", None, 1])
def test_pop_with_a_bad_mode_is_bad_input_and_changes_nothing(mode):
    context.put("s", "x", [1, 2])
    with pytest.raises(BadInput) as caught:
        context.pop("s", "x", mode)
    assert caught.value.field == "mode"
    assert context.get("s", ["x"]) == {"x": [1, 2]}
    assert stored("s", "x").version == 1


def test_pop_of_the_last_element_removes_the_variable():
    context.push("s", "x", 7)
    assert context.pop("s", "x") == 7
    assert not Variable.objects.exists() and not Element.objects.exists()
    assert context.get("s", ["x"]) == {"x": None}


def test_a_list_left_with_one_string_collapses_to_that_string():
    context.put("s", "x", ["a", "b"])
    assert context.pop("s", "x") == "b"
    variable = stored("s", "x")
    assert (variable.is_list, variable.value) == (False, "a")
    assert not Element.objects.exists()
    assert context.get("s", ["x"]) == {"x": "a"}
    assert context.push("s", "x", "c").length == 2  # and a string pushes as before


def test_collapse_by_fifo_keeps_the_last_string():
    context.put("s", "x", [1, "b"])
    assert context.pop("s", "x", "FIFO") == 1
    assert context.get("s", ["x"]) == {"x": "b"}


@pytest.mark.parametrize("element", [1, None, True, {"a": 1}, ["a"]])
def test_a_list_left_with_one_non_string_is_not_collapsed(element):
    context.put("s", "x", [element, "top"])
    assert context.pop("s", "x") == "top"
    assert context.get("s", ["x"]) == {"x": [element]}
    assert stored("s", "x").is_list


def test_pop_of_an_absent_variable_is_variable_not_found():
    context.put("s", "other", 1)
    with pytest.raises(VariableNotFound):
        context.pop("s", "x")


def test_pop_in_an_unknown_scope_is_scope_not_found():
    with pytest.raises(ScopeNotFound):
        context.pop("nowhere", "x")
    assert not Scope.objects.exists()


def test_pop_of_an_empty_list_is_a_type_conflict_and_changes_nothing():
    context.put("s", "x", [])
    with pytest.raises(TypeConflict):
        context.pop("s", "x")
    variable = stored("s", "x")
    assert (variable.is_list, variable.length, variable.version) == (True, 0, 1)


@pytest.mark.parametrize("value", [5, 0.5, False, None, {"a": "b"}])
def test_pop_of_another_type_is_a_type_conflict_and_changes_nothing(value):
    context.put("s", "x", value)
    with pytest.raises(TypeConflict):
        context.pop("s", "x", "FIFO")
    variable = stored("s", "x")
    assert (variable.value, variable.version) == (value, 1)


def test_pushes_and_pops_interleave_in_order():
    for i in range(5):
        context.push("s", "q", i)
    assert [context.pop("s", "q", "FIFO") for _ in range(2)] == [0, 1]
    context.push("s", "q", 5)
    assert context.get("s", ["q"]) == {"q": [2, 3, 4, 5]}
    assert [context.pop("s", "q") for _ in range(4)] == [5, 4, 3, 2]
    assert not Variable.objects.exists()


# delete and delete_scope


def test_delete_removes_a_variable_and_its_elements():
    context.put("s", "x", [1, 2, 3])
    context.put("s", "y", 1)
    context.delete("s", "x")
    assert context.get("s") == {"y": 1}
    assert not Element.objects.exists()


def test_delete_of_an_absent_variable_is_variable_not_found():
    context.put("s", "y", 1)
    with pytest.raises(VariableNotFound):
        context.delete("s", "x")


def test_delete_in_an_unknown_scope_is_scope_not_found():
    with pytest.raises(ScopeNotFound):
        context.delete("nowhere", "x")


def test_delete_scope_removes_everything_in_it():
    context.put("s", "x", [1, 2])
    context.put("s", "y", "v")
    context.put("keep", "z", 1)
    context.delete_scope("s")
    assert list(Scope.objects.values_list("key", flat=True)) == ["keep"]
    assert Variable.objects.count() == 1 and not Element.objects.exists()
    with pytest.raises(ScopeNotFound):
        context.delete_scope("s")


# owners


def test_owners_isolate_scopes_of_the_same_key(alice, bob):
    context.put("default", "x", "alice's", owner=alice)
    context.put("default", "x", "bob's", owner=bob)
    context.put("default", "x", "site's")
    assert Scope.objects.filter(key="default").count() == 3
    assert context.get("default", ["x"], owner=alice) == {"x": "alice's"}
    assert context.get("default", ["x"], owner=bob) == {"x": "bob's"}
    assert context.get("default", ["x"]) == {"x": "site's"}
    context.delete_scope("default", owner=alice)
    with pytest.raises(ScopeNotFound):
        context.get("default", owner=alice)
    assert context.get("default", ["x"], owner=bob) == {"x": "bob's"}


def test_a_users_scope_is_not_in_the_site_namespace(alice):
    context.push("mine", "x", 1, owner=alice)
    with pytest.raises(ScopeNotFound):
        context.pop("mine", "x")
    assert context.get_state("mine", "x", "default") == "default"


def test_changes_record_their_actor():
    context.put("s", "x", "a", by="conv-1")
    assert stored("s", "x").updated_by == "conv-1"
    context.push("s", "x", "b", by="conv-2")
    assert stored("s", "x").updated_by == "conv-2"


# keys and values


@pytest.mark.parametrize(
    ("scope", "name", "field"),
    [
        ("", "x", "scope"),
        ("s" * 256, "x", "scope"),
        ("s", "", "name"),
        ("s", "n" * 256, "name"),
        ("a\x00b", "x", "scope"),
        ("s", "\ud800", "name"),
        (5, "x", "scope"),
        ("s", None, "name"),
    ],
)
def test_bad_keys_are_bad_input_and_store_nothing(scope, name, field):
    for operation in (context.put, context.push):
        with pytest.raises(BadInput) as caught:
            operation(scope, name, 1)
        assert caught.value.field == field
    assert not Scope.objects.exists()


def test_keys_of_255_characters_with_slashes_are_fine():
    scope, name = "projects/" + "p" * 246, "n/" * 127 + "n"
    context.put(scope, name, 1)
    assert context.get(scope, [name]) == {name: 1}


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), "a\x00", "\udc00", {"k": [float("-inf")]}, {1: "a"}, object()],
)
def test_unstorable_values_are_bad_input_and_store_nothing(value):
    for operation in (context.put, context.push):
        with pytest.raises(BadInput) as caught:
            operation("s", "x", value)
        assert caught.value.field == "value"
    assert not Scope.objects.exists()


# get_state and set_state


def test_get_state_returns_the_value_or_the_default():
    context.set_state("s", "k", {"v": 1})
    assert context.get_state("s", "k", "dflt") == {"v": 1}
    assert context.get_state("s", "absent", "dflt") == "dflt"
    assert context.get_state("unknown", "k", "dflt") == "dflt"
    assert context.get_state("unknown", "k") is None


def test_get_state_with_bad_input_returns_the_default():
    assert context.get_state("s" * 300, "k", 42) == 42
    assert context.get_state("s", "\x00", 42) == 42


def test_set_state_raises_on_failure():
    with pytest.raises(BadInput):
        context.set_state("s", "k", float("nan"))
    with pytest.raises(BadInput):
        context.set_state("", "k", 1)


def test_set_state_records_the_actor_and_grows_the_version():
    assert context.set_state("s", "k", 1, by="conv").version == 1
    assert context.set_state("s", "k", 2, by="conv").version == 2
    assert stored("s", "k").updated_by == "conv"
