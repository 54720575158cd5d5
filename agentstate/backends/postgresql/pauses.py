"""Paused runs on PostgreSQL: ``sql/20_pauses.sql``, one call per operation."""

import functools
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

from django.db import connections
from django.db.models import Field

from agentstate.backends.base import Changed, Page, PauseFilters
from agentstate.backends.events import from_json as events_from_json
from agentstate.db import Columns, Json, from_json, where_clause
from agentstate.models import PausedRun
from agentstate.types import Actor, Reach

from .reading import page_rows

Status = PausedRun.Status
# The filters of a listing that compare a column with the value given.
EQUAL = ("owner", "chat_id", "tool_call_id")


def reach_args(reach: Reach | None) -> dict[str, Any]:
    """A reach as the functions take it: both ``NULL`` for every pause."""
    return {
        "p_reach_user": None if reach is None else reach.user_id,
        "p_reach_name": None if reach is None else reach.username,
    }


def by_args(by: Actor) -> dict[str, Any]:
    """Who makes the change, as the functions take it."""
    return {"p_user_id": by.user_id, "p_actor": by.name}


class PauseOperations:
    alias: str
    call: Callable[..., dict[str, Any]]

    def _changed(self, result: dict[str, Any]) -> Changed[PausedRun]:
        return Changed(
            from_json(PausedRun, result["pause"], self.alias),
            events_from_json(result["events"], self.alias),
        )

    def put_pause(
        self,
        chat_id: str,
        tool_call_id: str,
        owner: str,
        payload: Any,
        ttl: timedelta,
        question_id: uuid.UUID,
        reach: Reach | None,
        by: Actor,
    ) -> Changed[PausedRun]:
        return self._changed(
            self.call(
                "put_pause",
                p_chat=chat_id,
                p_call=tool_call_id,
                p_owner=owner,
                p_payload=Json(payload),
                p_ttl=ttl,
                p_question=question_id,
                **reach_args(reach),
                **by_args(by),
            )
        )

    def claim(
        self, chat_id: str, tool_call_id: str, owner: str, question_id: str, by: Actor
    ) -> Changed[PausedRun]:
        return self._changed(
            self.call(
                "claim",
                p_chat=chat_id,
                p_call=tool_call_id,
                p_owner=owner,
                p_question=question_id,
                **by_args(by),
            )
        )

    def resolve(
        self, chat_id: str, tool_call_id: str, reach: Reach | None, by: Actor
    ) -> Changed[PausedRun]:
        return self._changed(
            self.call(
                "resolve", p_chat=chat_id, p_call=tool_call_id, **reach_args(reach), **by_args(by)
            )
        )

    def cancel(
        self, chat_id: str, tool_call_id: str, reach: Reach | None, by: Actor
    ) -> Changed[PausedRun]:
        return self._changed(
            self.call(
                "cancel", p_chat=chat_id, p_call=tool_call_id, **reach_args(reach), **by_args(by)
            )
        )

    def pauses_page(
        self, filters: PauseFilters, reach: Reach | None, offset: int, limit: int
    ) -> Page[PausedRun]:
        named = tuple(name for name in EQUAL if name in filters)
        status = filters.get("status")
        params: dict[str, Any] = {name: filters[name] for name in named}
        if status not in (None, Status.PENDING, Status.EXPIRED):
            params["status"] = status
        if reach is not None:
            params.update(creator=reach.user_id, username=reach.username)
        statement = _page_statement(named, status, reach is not None)
        # planned for its caller at every call: the owner's pauses OR the creator's
        rows = page_rows(
            connections[self.alias],
            statement,
            {**params, "limit": limit, "offset": offset},
            generic=False,
        )
        pause_of = _page_columns().builder(self.alias)
        status_at = len(_page_columns().columns)
        page = []
        for row in rows:
            pause = pause_of(row[:status_at])
            pause.current_status = row[status_at]
            page.append(pause)
        return Page(page, rows[0][status_at + 1] if rows else 0)


@functools.cache
def _page_columns() -> Columns:
    return Columns(PausedRun)


@functools.cache
def _page_statement(named: tuple[str, ...], status: str | None, reached: bool) -> str:
    """A page of pauses (``Backend.pauses_page``): one fixed statement per shape of
    the filters (which are given; ``status``: pending or expired, written on the
    stored columns as ``querysets.pause_in_status`` writes them, else a parameter),
    so that each reads through the indexes the filters have. Each row the pause's
    columns, its current status and the listing's count as the ORM's listing has
    them (Django's ``Now()`` is ``STATEMENT_TIMESTAMP()``). The count is a
    subquery of its own, not a window over the rows: a window reads and sorts
    every row of the listing, payloads and all, for a page of a few. A statement
    rather than a function: a read with nothing to check or write."""
    meta = PausedRun._meta

    def column(name: str) -> str:
        return f"p.{cast(Field, meta.get_field(name)).column}"

    state, expires = column("status"), column("expires_at")
    pending, expired = Status.PENDING.value, Status.EXPIRED.value
    overdue = f"{state} = '{pending}' AND {expires} <= STATEMENT_TIMESTAMP()"
    where = [f"{column(name)} = %({name})s" for name in named]
    if status == pending:
        where.append(f"{state} = '{pending}' AND {expires} > STATEMENT_TIMESTAMP()")
    elif status == expired:
        where.append(f"({state} = '{expired}' OR ({overdue}))")
    elif status is not None:
        where.append(f"{state} = %(status)s")
    table = meta.db_table
    owner, creator = column("owner"), column("created_by")

    def counted(*also: str) -> str:
        return f"(SELECT COUNT(*) FROM {table} p{where_clause([*where, *also])})"

    if reached:
        # Owned, or else created: two counts, each through its own index.
        count = (
            f"{counted(f'{owner} = %(username)s')}"
            f" + {counted(f'{creator} = %(creator)s', f'{owner} <> %(username)s')}"
        )
        where.append(f"({creator} = %(creator)s OR {owner} = %(username)s)")
    else:
        count = counted()
    return (
        f"SELECT {_page_columns().select('p')},"
        f" CASE WHEN {overdue} THEN '{expired}' ELSE {state} END,"
        f" {count} FROM {table} p{where_clause(where)}"
        f" ORDER BY {column('created_at')} DESC, p.{meta.pk.column} DESC"
        " LIMIT %(limit)s OFFSET %(offset)s"
    )
