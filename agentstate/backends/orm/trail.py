"""The audit trail on the ORM: a page of events as a QuerySet."""

from agentstate.backends.base import EventFilters, Page
from agentstate.db import window_page
from agentstate.models import Event
from agentstate.types import Reach

from .operations import Operations

# The filters of a listing that compare a column with the value given.
EQUAL = ("kind", "object_type", "object_id")


class TrailOperations(Operations):
    def events_page(
        self, filters: EventFilters, reach: Reach | None, offset: int, limit: int
    ) -> Page[Event]:
        events = self.rows(Event).select_related("user", "created_by")
        if reach is not None:
            events = events.reached_by(reach)
        if "run_id" in filters:
            events = events.of_run(filters["run_id"])
        events = events.filter(**{name: filters[name] for name in EQUAL if name in filters})
        rows, total = window_page(events.order_by("-created_at", "-pk"), offset, limit)
        return Page(rows, total)
