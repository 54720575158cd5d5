"""Every index the models declare earns its writes: none repeats what another serves."""

import pytest
from django.apps import apps
from django.db import models

from agentstate.models import Element


def _indexes(model: type[models.Model]) -> list[tuple[str, tuple[str, ...], str]]:
    """(name, columns, condition) of every index the table gets, plain or unique."""
    found = []
    for field in model._meta.concrete_fields:
        if field.primary_key or field.unique or field.db_index:
            found.append((f"field {field.name}", (field.column,), ""))
    for index in [*model._meta.indexes, *model._meta.constraints]:
        fields = getattr(index, "fields", ())
        if fields:
            columns = tuple(model._meta.get_field(f).column for f in fields)
            found.append((index.name, columns, str(getattr(index, "condition", None) or "")))
    return found


@pytest.mark.parametrize(
    "model", list(apps.get_app_config("agentstate").get_models()), ids=lambda m: m.__name__
)
def test_no_index_is_a_prefix_of_another(model):
    indexes = _indexes(model)
    covered = [
        (name, other)
        for name, columns, condition in indexes
        for other, longer, other_condition in indexes
        if other != name and condition == other_condition and longer[: len(columns)] == columns
    ]
    assert covered == []


def test_an_element_is_found_through_one_index():
    """Popping from a long list cannot pick an index that scans every element."""
    assert sorted(columns for _, columns, _ in _indexes(Element)) == [
        ("id",),
        ("variable_id", "position"),
    ]
