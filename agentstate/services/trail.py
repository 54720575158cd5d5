"""The audit trail: a page of events (``Event``, written by the backends with each
change they record)."""

from typing import cast

from django.db.models import Field

from agentstate.backends import Page, backend
from agentstate.exceptions import BadInput
from agentstate.models import Event
from agentstate.types import Reach
from agentstate.validation import check_key, check_run_id

__all__ = ["FILTERS", "events_page"]

# What a listing of events filters by (``events_page``).
FILTERS = ("kind", "object_type", "object_id", "run_id")
# The longest value a column's filter can match: its field's length.
_LONGEST = {
    name: cast(int, cast(Field, Event._meta.get_field(name)).max_length) for name in FILTERS[:3]
}


def events_page(
    *, reach: Reach | None = None, offset: int = 0, limit: int, **filters: str
) -> Page[Event]:
    """A page of events, newest first: ``limit`` of them from ``offset``, each with its
    ``user`` and ``created_by``, and how many match in all.

    ``filters`` (each optional): ``kind``, ``object_type`` and ``object_id`` (equal),
    ``run_id`` (the events of the run and of its approval requests); ``reach``: only
    the events about objects its user created or its username owns, and every event
    about an object of its ``object_types`` (``None``: every event).
    """
    for name, value in filters.items():
        if name not in FILTERS:
            raise BadInput(f"{name}: no such filter of events.", field=name)
        if name == "run_id":
            check_run_id(value)
        else:
            check_key(value, name, _LONGEST[name])
    if offset < 0 or limit < 1:
        raise BadInput("offset must be 0 or more and limit 1 or more.", field="limit")
    return backend().events_page(filters, reach, offset, limit)
