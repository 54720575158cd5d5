"""push, extend, pop, put and get_list against a Python model of the rules in docs/concepts.md (hypothesis)."""

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentstate.exceptions import NotFound, TypeConflict
from agentstate.models import Variable
from agentstate.services import context

pytestmark = pytest.mark.django_db

ABSENT = object()

text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=4)
scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text
values = scalars | st.lists(scalars, max_size=3) | st.dictionaries(text, scalars, max_size=2)
operations = st.lists(
    st.tuples(st.just("push"), values)
    | st.tuples(st.just("pop"), st.sampled_from(["LIFO", "FIFO", "lifo", "fifo"]))
    | st.tuples(st.just("put"), values)
    | st.tuples(st.just("extend"), st.lists(values, min_size=1, max_size=3))
    | st.tuples(st.just("get_list"), st.none() | st.integers(1, 5)),
    max_size=25,
)


def model_push(state, value):
    if state is ABSENT:
        return [value]
    if isinstance(state, str):
        return [state, value]
    if isinstance(state, list):
        return [*state, value]
    raise TypeConflict


def model_extend(state, items):
    if state is ABSENT:
        return list(items)
    if isinstance(state, str):
        return [state, *items]
    if isinstance(state, list):
        return [*state, *items]
    raise TypeConflict


def model_get_list(state, last):
    if state is ABSENT:
        raise NotFound  # scope not found before the first write, then variable not found
    if isinstance(state, str):
        return [state]
    if not isinstance(state, list):
        raise TypeConflict
    return state if last is None else state[-last:]


def call(op, scope, name, argument):
    if op == "get_list":
        return context.get_list(scope, name, last=argument)
    return getattr(context, op)(scope, name, argument)


def model_pop(state, mode):
    if state is ABSENT:
        raise NotFound  # scope not found before the first write, then variable not found
    if isinstance(state, str):
        return ABSENT, state
    if not isinstance(state, list) or not state:
        raise TypeConflict
    rest = list(state)
    value = rest.pop() if mode.upper() == "LIFO" else rest.pop(0)
    if not rest:
        return ABSENT, value
    if len(rest) == 1 and isinstance(rest[0], str):
        return rest[0], value
    return rest, value


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations)
def test_push_extend_pop_put_and_get_list_follow_the_list_model(ops):
    scope, name = f"prop/{uuid.uuid4()}", "v"
    state, version = ABSENT, 0
    for op, argument in ops:
        try:
            if op == "push":
                expected = model_push(state, argument)
            elif op == "extend":
                expected = model_extend(state, argument)
            elif op == "get_list":
                expected, read = state, model_get_list(state, argument)
            elif op == "pop":
                expected, popped = model_pop(state, argument)
            else:
                expected = argument
        except (TypeConflict, NotFound) as refusal:
            with pytest.raises(type(refusal)):
                call(op, scope, name, argument)
        else:
            result = call(op, scope, name, argument)
            if op == "pop":
                assert result == popped
            elif op in ("push", "extend"):
                assert result.length == len(expected)
            elif op == "get_list":
                assert result.values == read
                assert result.length == (len(state) if isinstance(state, list) else 1)
            changed = op != "get_list"
            state = expected
            version = 0 if expected is ABSENT else version + changed
        stored = Variable.objects.filter(scope__key=scope, name=name).first()
        if state is ABSENT:
            assert stored is None
        else:
            assert context.get(scope, [name]) == {name: state}
            assert stored.version == version
