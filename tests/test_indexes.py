"""Every index the tables carry earns its writes: none repeats what another already serves."""

import pytest
from django.apps import apps
from django.db import connection

from agentstate.models import Element


def _indexes(table: str) -> list[tuple[str, list[str]]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return [
        (name, info["columns"])
        for name, info in constraints.items()
        # PostgreSQL's varchar_pattern_ops twin of a unique column serves LIKE, not equality
        if (info["index"] or info["unique"] or info["primary_key"]) and not name.endswith("_like")
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "model", list(apps.get_app_config("agentstate").get_models()), ids=lambda m: m.__name__
)
def test_no_index_is_a_prefix_of_another(model):
    indexes = _indexes(model._meta.db_table)
    covered = [
        (name, columns, other)
        for name, columns in indexes
        for other, longer in indexes
        if other != name and longer[: len(columns)] == columns
    ]
    assert covered == []


@pytest.mark.django_db
def test_an_element_is_found_through_one_index():
    """Popping from a long list cannot pick an index that scans every element."""
    indexes = [columns for _, columns in _indexes(Element._meta.db_table)]
    assert sorted(indexes) == [["id"], ["variable_id", "position"]]
