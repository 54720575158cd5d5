"""The audit trail on PostgreSQL: a page of events as one fixed statement per shape
of the filters (a read with nothing to check or write: no function)."""

import functools
from dataclasses import dataclass
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import Field

from agentstate.backends.base import EventFilters, Page
from agentstate.db import Columns, where_clause
from agentstate.models import ApprovalRequest, Event, Run
from agentstate.types import Reach

from .reading import page_rows

# The filters of a listing that compare a column with the value given.
EQUAL = ("kind", "object_type", "object_id")
# Where an event keeps its related users (``_state.fields_cache``), as select_related does.
_USER, _CREATED_BY = (
    cast(Any, Event._meta.get_field(name)).cache_name for name in ("user", "created_by")
)


class TrailOperations:
    alias: str

    def events_page(
        self, filters: EventFilters, reach: Reach | None, offset: int, limit: int
    ) -> Page[Event]:
        shape = _Shape(
            tuple(name for name in EQUAL if name in filters),
            "run_id" in filters,
            reach is not None,
            reach is not None and reach.user_id is not None,
            reach is not None and bool(reach.object_types),
        )
        params: dict[str, Any] = {**filters, "limit": limit, "offset": offset}
        if reach is not None:
            params.update(
                creator=reach.user_id, username=reach.username, types=list(reach.object_types)
            )
        rows = page_rows(
            connections[self.alias], _page_statement(shape), params, generic=shape.generic
        )
        reading = _page_columns()
        event_of = reading.event.builder(self.alias)
        user_of = reading.users.builder(self.alias)
        total_at = len(reading.event.columns)
        user_at, creator_at = total_at + 1, total_at + 1 + len(reading.users.columns)
        pk_at = reading.users.names.index(get_user_model()._meta.pk.attname)
        page = []
        for row in rows:
            event = event_of(row[:total_at])
            user, creator = row[user_at:creator_at], row[creator_at:]
            cached = event._state.fields_cache
            cached[_USER] = None if user[pk_at] is None else user_of(user)
            cached[_CREATED_BY] = None if creator[pk_at] is None else user_of(creator)
            page.append(event)
        return Page(page, rows[0][total_at] if rows else 0)


@dataclass(frozen=True)
class _Shape:
    """Which filters a page has: each gets a statement of its own (``_page_statement``)."""

    named: tuple[str, ...]
    of_run: bool
    reached: bool
    created: bool  # the reach names a user
    typed: bool  # the reach names object types

    @property
    def generic(self) -> bool:
        """Whether one plan serves every caller (``reading.page_rows``): a reach and no
        filter, each of its parts (what the caller owns, what it created for others)
        in order from the index that begins with it. Not with a filter or object
        types (an ``OR``, a column rare or common), nor a listing of everyone's (no
        caller picks its rows: without incremental sorts, as ``reading.GENERIC_PLAN``
        has it, its plan would sort them all)."""
        return self.reached and not (self.named or self.of_run or self.typed)


@dataclass(frozen=True)
class _PageColumns:
    event: Columns
    users: Columns


@functools.cache
def _page_columns() -> _PageColumns:
    user = get_user_model()
    # The serializer shows a user's ``username``; what it is known by, if another.
    users = Columns(user, (user._meta.pk.name, user.USERNAME_FIELD, "username"))
    return _PageColumns(Columns(Event), users)


def _column(model: type[Any], name: str) -> str:
    return cast(str, cast(Field, model._meta.get_field(name)).column)


@functools.cache
def _page_statement(shape: _Shape) -> str:
    """A page of events (``Backend.events_page``): one fixed statement per shape of
    the filters, so that each reads through the indexes its filters have, with the
    listing's count, as the ORM's QuerySet has them (``EventQuerySet.reached_by`` and
    ``of_run``): the count a subquery of its own, as a window would read every row of
    the listing. A reach without object types is read as two parts that share no
    event, the events of what the caller owns and those of what it created that it
    does not own, each counted and read in its order through an index of its own.
    The page is cut first, then its users joined: each row the event's columns, the
    count, its user's columns and its creator's."""
    reading = _page_columns()
    meta, user = Event._meta, get_user_model()._meta

    def column(name: str) -> str:
        return f"e.{_column(Event, name)}"

    where = [f"{column(name)} = %({name})s" for name in shape.named]
    if shape.of_run:
        requests, run = ApprovalRequest._meta, Run._meta
        where.append(
            f"(({column('object_type')} = '{run.model_name}'"
            f" AND {column('object_id')} = %(run_id)s)"
            f" OR ({column('object_type')} = '{requests.model_name}'"
            f" AND {column('object_id')} IN (SELECT (r.{requests.pk.column})::varchar"
            f" FROM {requests.db_table} r JOIN {run.db_table} run"
            f" ON run.{run.pk.column} = r.{_column(ApprovalRequest, 'run')}"
            f" WHERE run.{_column(Run, 'run_id')} = %(run_id)s)))"
        )
    if shape.reached and not shape.typed:
        # Owned, or else created: two parts, each read in order through its own index
        # (``agentstate_event_owner``, ``agentstate_event_created_by``) and counted,
        # where one scan of the ``OR`` reads every event of the table.
        parts = [[*where, f"{column('owner')} = %(username)s"]]
        if shape.created:
            parts.append(
                [
                    *where,
                    f"{column('created_by')} = %(creator)s",
                    f"{column('owner')} <> %(username)s",
                ]
            )
    else:
        if shape.reached:
            seen = [
                f"{column('owner')} = %(username)s",
                f"{column('object_type')} = ANY(%(types)s)",
            ]
            if shape.created:
                seen.insert(0, f"{column('created_by')} = %(creator)s")
            where.append(f"({' OR '.join(seen)})")
        parts = [where]
    events = reading.event.columns
    total = len(events)
    created_at, pk = (
        events.index(_column(Event, "created_at")),
        events.index(cast(str, meta.pk.column)),
    )
    user_id, created_by = (
        events.index(_column(Event, "user")),
        events.index(_column(Event, "created_by")),
    )
    order = f"ORDER BY {column('created_at')} DESC, e.{meta.pk.column} DESC"
    count = " + ".join(
        f"(SELECT COUNT(*) FROM {meta.db_table} e{where_clause(part)})" for part in parts
    )
    cut = " LIMIT %(limit)s OFFSET %(offset)s"
    if len(parts) == 1:
        rows = f"{meta.db_table} e{where_clause(parts[0])}"
    else:
        # The page's keys first, among the first offset + limit of each part (read from
        # its index alone where the table is vacuumed), then their rows.
        key = f"{column('created_at')}, e.{meta.pk.column}"
        keys = " UNION ALL ".join(
            f"(SELECT {key} FROM {meta.db_table} e{where_clause(part)} {order}"
            " LIMIT %(offset)s + %(limit)s)"
            for part in parts
        )
        rows = (
            f"(SELECT {key} FROM ({keys}) e {order}{cut}) k"
            f" JOIN {meta.db_table} e ON e.{meta.pk.column} = k.{meta.pk.column}"
        )
        cut = ""
    return (
        f"SELECT p.*, {reading.users.select('u', total + 1)},"
        f" {reading.users.select('cb', total + 1 + len(reading.users.columns))}"
        f" FROM (SELECT {reading.event.select('e')}, {count} AS c{total}"
        f" FROM {rows} {order}{cut}) p"
        f" LEFT JOIN {user.db_table} u ON u.{user.pk.column} = p.c{user_id}"
        f" LEFT JOIN {user.db_table} cb ON cb.{user.pk.column} = p.c{created_by}"
        f" ORDER BY p.c{created_at} DESC, p.c{pk} DESC"
    )
