"""Runs, usage and approvals on PostgreSQL: ``sql/30_runs.sql``."""

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import Field

from agentstate.backends.base import Changed, Page, RequestFilters
from agentstate.backends.events import from_json as events_from_json
from agentstate.db import (
    Columns,
    Json,
    cursor,
    decoded,
    from_json,
    group_membership,
    where_clause,
)
from agentstate.models import ApprovalRequest, Run, Vote
from agentstate.policies import DECIDED_BY_POLICY, POLICY_ACTOR
from agentstate.records import DECIDED_BY_RECORDS, RECORDS_ACTOR
from agentstate.types import Actor, Reach, Records, Verdict, arguments_digest

from .reading import page_rows

Status = ApprovalRequest.Status
# Where a row keeps its related objects (``_state.fields_cache``), as select_related does.
_RUN, _DECIDED_BY = (
    cast(Any, ApprovalRequest._meta.get_field(name)).cache_name for name in ("run", "decided_by")
)

_BY = cast(Any, Vote._meta.get_field("by")).cache_name


def _creator(reach: Reach | None) -> int | None:
    """The reach as the functions take it: the creator whose runs it holds, or
    ``None`` for every run."""
    return None if reach is None else reach.user_id


class RunOperations:
    alias: str
    call: Callable[..., dict[str, Any]]

    def _run(self, state: dict[str, Any]) -> Run:
        run = from_json(Run, state["run"], self.alias)
        run.approvals = dict(state["records"])
        return run

    def _request(self, result: dict[str, Any]) -> ApprovalRequest:
        """The request a request's operation answered (``row_to_json`` of its row and
        its run's), with its ``current_status`` where the answer has one."""
        request = from_json(ApprovalRequest, result["request"], self.alias)
        request.run = from_json(Run, result["run"], self.alias)
        if "current_status" in result:
            request.current_status = result["current_status"]  # type: ignore[attr-defined]
        return request

    def create_run(self, run_id: str, context: Any, created_by_id: int | None) -> Run:
        return self._run(
            self.call(
                "create_run", p_run_id=run_id, p_context=Json(context), p_created_by=created_by_id
            )
        )

    def run(self, run_id: str, reach: Reach | None) -> Run:
        return self._run(self.call("get_run", p_run_id=run_id, p_reach=_creator(reach)))

    def update_run(self, run_id: str, context: Any, reach: Reach | None) -> Run:
        return self._run(
            self.call(
                "update_run", p_run_id=run_id, p_context=Json(context), p_reach=_creator(reach)
            )
        )

    def add_usage(
        self, run_id: str, increments: dict[str, int], reach: Reach | None
    ) -> dict[str, int]:
        # agentstate_add_usage(p_requests, p_input, ...): each counter less "_tokens"
        counters = {
            f"p_{name.removesuffix('_tokens')}": increments[name] for name in Run.USAGE_FIELDS
        }
        totals = self.call("add_usage", p_run_id=run_id, **counters, p_reach=_creator(reach))
        return {name: totals[name] for name in Run.USAGE_FIELDS}

    def approval_request(
        self, request_id: int, approval_ttl: timedelta, reach: Reach | None
    ) -> ApprovalRequest | None:
        creator = _creator(reach)
        with cursor(connections[self.alias]) as c:
            c.execute(_request_statement(), [approval_ttl, request_id, creator, creator])
            row = c.fetchone()
        if row is None:
            return None
        request_row, run_row, decider_row, current_status = row
        request = from_json(ApprovalRequest, decoded(request_row), self.alias)
        request.run = from_json(Run, decoded(run_row), self.alias)
        request.decided_by = (
            None
            if decider_row is None
            else from_json(get_user_model(), decoded(decider_row), self.alias)
        )
        request.current_status = current_status  # type: ignore[attr-defined]
        return request

    def approval_requests_page(
        self,
        filters: RequestFilters,
        approval_ttl: timedelta,
        reach: Reach | None,
        offset: int,
        limit: int,
    ) -> Page[ApprovalRequest]:
        status = filters.get("status")
        named = tuple(name for name in ("tool_name", "run_id") if name in filters)
        creator = None if reach is None else reach.user_id
        shape = _PageShape(
            named,
            status if status in (None, Status.PENDING, Status.EXPIRED) else "",
            reach is not None,
            reach is not None and creator is None,
        )
        params: dict[str, Any] = {
            **{name: filters[name] for name in named},
            "ttl": approval_ttl,
            "status": status,
            "creator": creator,
            "limit": limit,
            "offset": offset,
        }
        rows = page_rows(
            connections[self.alias], _page_statement(shape), params, generic=shape.generic
        )
        reading = _page_columns()
        alias = self.alias
        request_of = reading.request.builder(alias)
        run_of = reading.runs.builder(alias)
        user_of = reading.users.builder(alias)
        run_at, user_at, status_at = reading.run, reading.user, reading.status
        page = []
        for row in rows:
            request = request_of(row[:run_at])
            decider = row[user_at:status_at]
            cached = request._state.fields_cache
            cached[_RUN] = run_of(row[run_at:user_at])
            cached[_DECIDED_BY] = None if decider[0] is None else user_of(decider)
            request.current_status = row[status_at]
            votes = row[status_at + 3]  # after the count and the rule
            if votes is not None:
                request._prefetched_objects_cache = {
                    "votes": _prefetched(reading, alias, decoded(votes))
                }
            page.append(request)
        return Page(page, rows[0][reading.status + 1] if rows else 0)

    def records(self, run_id: str, reach: Reach | None) -> Records:
        return dict(self.call("records", p_run_id=run_id, p_reach=_creator(reach)))

    def is_tool_approved(
        self,
        run_id: str,
        tool_name: str,
        call_id: str,
        arguments: Any,
        digest: str | None,
        reach: Reach | None,
    ) -> Verdict:
        result = self.call(
            "is_tool_approved",
            p_run_id=run_id,
            p_tool=tool_name,
            p_call=call_id,
            p_arguments=None if arguments is None else Json(arguments),
            p_digest=digest,
            p_reach=_creator(reach),
        )
        return cast(bool | None, result["approved"]), result.get("reason")

    def record_decision(
        self,
        run_id: str,
        tool_name: str,
        call_id: str,
        approve: bool,
        always: bool,
        reason: str,
        reach: Reach | None,
        by: Actor,
    ) -> Changed[Run]:
        result = self.call(
            "record_decision",
            p_run_id=run_id,
            p_tool=tool_name,
            p_call=call_id,
            p_approve=approve,
            p_always=always,
            p_reason=reason,
            p_reach=_creator(reach),
            p_user=by.user_id,
            p_actor=by.name,
            p_membership=group_membership(),
        )
        return Changed(self._run(result), events_from_json(result["events"], self.alias))

    def rebuild_approvals(
        self, run_id: str, records: Records, reach: Reach | None, by: Actor
    ) -> Changed[Run]:
        result = self.call(
            "rebuild_approvals",
            p_run_id=run_id,
            p_records=Json(records),
            p_reach=_creator(reach),
            p_user=by.user_id,
            p_actor=by.name,
            p_membership=group_membership(),
        )
        return Changed(self._run(result), events_from_json(result["events"], self.alias))

    def request_approval(
        self,
        run_id: str,
        tool_name: str,
        call_id: str,
        arguments: Any,
        approval_ttl: timedelta,
        reach: Reach | None,
        by: Actor,
    ) -> Changed[tuple[ApprovalRequest, bool]]:
        result = self.call(
            "request_approval",
            p_run_id=run_id,
            p_tool=tool_name,
            p_call=call_id,
            p_arguments=None if arguments is None else Json(arguments),
            p_decided_reason=DECIDED_BY_RECORDS,
            p_policy_reason=DECIDED_BY_POLICY,
            p_policy_actor=POLICY_ACTOR,
            p_records_actor=RECORDS_ACTOR,
            p_ttl=approval_ttl,
            p_reach=_creator(reach),
            p_user=by.user_id,
            p_actor=by.name,
            p_digest=arguments_digest(arguments),
        )
        return Changed(
            (self._request(result), result["created"]),
            events_from_json(result["events"], self.alias),
        )

    def decide(
        self,
        request_id: int,
        approve: bool,
        always: bool,
        reason: str,
        arguments: Any,
        approval_ttl: timedelta,
        by: Actor,
    ) -> Changed[ApprovalRequest]:
        result = self.call(
            "decide",
            p_id=request_id,
            p_approve=approve,
            p_always=always,
            p_reason=reason,
            p_arguments=None if arguments is None else Json(arguments),
            p_ttl=approval_ttl,
            p_user=by.user_id,
            p_actor=by.name,
            p_digest=None if arguments is None else arguments_digest(arguments),
            p_membership=group_membership(),
        )
        return Changed(self._request(result), events_from_json(result["events"], self.alias))


@functools.cache
def _request_statement() -> str:
    """One request with its run and decider, and its status by the database clock
    (``querysets.current_status``: Django's ``Now()`` is ``STATEMENT_TIMESTAMP()``).
    A fixed statement rather than a function: a read with nothing to check or write,
    which the site's user table takes part in."""
    meta, run, user = ApprovalRequest._meta, Run._meta, get_user_model()._meta
    status, expired = meta.get_field("status").column, Status.EXPIRED.value
    return (
        f"SELECT to_jsonb(r), to_jsonb(run), to_jsonb(u),"
        f" CASE WHEN {overdue_sql('r', '%s::interval')} THEN '{expired}' ELSE r.{status} END"
        f" FROM {meta.db_table} r"
        f" JOIN {run.db_table} run ON run.{run.pk.column} = r.{meta.get_field('run').column}"
        f" LEFT JOIN {user.db_table} u"
        f" ON u.{user.pk.column} = r.{meta.get_field('decided_by').column}"
        f" WHERE r.{meta.pk.column} = %s"
        f" AND (%s::bigint IS NULL OR r.{meta.get_field('created_by').column} = %s::bigint)"
    )


@dataclass(frozen=True)
class _PageShape:
    """Which filters a page of requests has: ``tool_name`` and ``run_id`` given;
    ``status`` pending or expired (written on the columns), ``""`` another (a
    parameter) or ``None``; a reach, and one of no user (its requests: those filed
    by none, as the ORM's ``created_by_id=None``)."""

    named: tuple[str, ...]
    status: str | None
    reached: bool
    nobody: bool

    @property
    def generic(self) -> bool:
        """Whether one plan serves every caller (``reading.page_rows``): a creator's
        requests of one status and no other filter, in order from the index that
        begins with both (``agentstate_request_creator``). Not every status (sorted),
        expired ones (an ``OR``), a filter's column (rare or common), nor a listing
        of every creator's (no caller picks its rows: without incremental sorts, as
        ``reading.GENERIC_PLAN`` has it, its plan would sort them all)."""
        return (
            not self.named
            and self.reached
            and not self.nobody
            and self.status in (Status.PENDING, "")
        )


@dataclass(frozen=True)
class _PageColumns:
    request: Columns
    runs: Columns
    users: Columns
    votes: Columns
    run: int  # where the run's columns start in a row, then the decider's, the status's
    user: int
    status: int


@functools.cache
def _page_columns() -> _PageColumns:
    user = get_user_model()
    request = Columns(ApprovalRequest)
    runs = Columns(Run, ("id", "run_id"))
    users = Columns(user, (user._meta.pk.name, user.USERNAME_FIELD))
    run = len(request.columns)
    return _PageColumns(
        request,
        runs,
        users,
        Columns(Vote),
        run,
        run + len(runs.columns),
        run + 2 + len(runs.columns),
    )


def _prefetched(reading: _PageColumns, alias: str, rows: list[list[Any]]) -> Any:
    """A request's votes as its ``votes`` prefetched: a QuerySet holding them, each
    with its ``by`` (its id and username)."""
    votes = []
    width = len(reading.votes.columns)
    by_at = reading.votes.names.index("by_id")
    vote_of = reading.votes.builder(alias, as_json=True)
    user_of = reading.users.builder(alias, as_json=True)
    for row in rows:
        vote = vote_of(row[:width])
        by = row[by_at]
        vote._state.fields_cache[_BY] = None if by is None else user_of([by, row[width]])
        votes.append(vote)
    prefetched: Any = Vote.objects.using(alias).all()
    prefetched._result_cache = votes
    prefetched._prefetch_done = True
    return prefetched


def _column(model: type[Any], name: str) -> str:
    return cast(str, cast(Field, model._meta.get_field(name)).column)


def overdue_sql(r: str, ttl: str) -> str:
    """A pending request past its deadline by the database clock (filed under no rule:
    older than ``ttl``), as ``querysets.past_ttl`` has it (Django's ``Now()`` is
    ``STATEMENT_TIMESTAMP()``), never NULL; ``r``: the request table's alias."""
    status = _column(ApprovalRequest, "status")
    return f"({r}.{status} = '{Status.PENDING.value}' AND {_deadline_passed_sql(r, ttl)})"


def _deadline_passed_sql(r: str, ttl: str) -> str:
    """Whether a request's deadline (filed under no rule: its ``created_at`` plus
    ``ttl``) has passed by the database clock, whatever its status; never NULL. The
    clock and the cut are scalar subqueries, which PostgreSQL computes once a
    statement: written inline, ``STATEMENT_TIMESTAMP() - ttl`` is computed again for
    every row a count reads (a third of a count of 3,000 pending requests)."""
    created_at, deadline = (_column(ApprovalRequest, name) for name in ("created_at", "deadline"))
    return (
        f"CASE WHEN {r}.{deadline} IS NULL"
        f" THEN {r}.{created_at} <= (SELECT STATEMENT_TIMESTAMP() - {ttl})"
        f" ELSE {r}.{deadline} <= (SELECT STATEMENT_TIMESTAMP()) END"
    )


@functools.cache
def _page_statement(shape: _PageShape) -> str:
    """A page of requests (``Backend.approval_requests_page``): one fixed statement per
    shape of the filters, each row the request's columns, its run's id and run_id,
    its decider's id and username, its current status, the listing's count (a
    subquery of its own: a window would read every row of the listing), and its
    votes as JSON (each the vote's columns, then its voter's username; ``[]`` for
    none), ``NULL`` for a request filed under no rule, which ``approvals.votes_of``
    answers without them. The page is cut
    first, then its votes read."""
    reading = _page_columns()
    meta, run, vote = ApprovalRequest._meta, Run._meta, Vote._meta
    user = get_user_model()._meta

    def column(name: str) -> str:
        return f"r.{_column(ApprovalRequest, name)}"

    overdue = overdue_sql("r", "%(ttl)s::interval")
    state = column("status")
    where = [f"{column('tool_name')} = %(tool_name)s"] if "tool_name" in shape.named else []
    if "run_id" in shape.named:
        where.append(f"run.{_column(Run, 'run_id')} = %(run_id)s")
    if shape.status == Status.PENDING:
        # Pending is the one status that can be overdue: its deadline alone decides.
        passed = _deadline_passed_sql("r", "%(ttl)s::interval")
        where.append(f"{state} = '{Status.PENDING.value}' AND NOT {passed}")
    elif shape.status == Status.EXPIRED:
        where.append(f"({state} = '{Status.EXPIRED.value}' OR {overdue})")
    elif shape.status is not None:
        where.append(f"{state} = %(status)s")
    if shape.nobody:
        where.append(f"{column('created_by')} IS NULL")
    elif shape.reached:
        where.append(f"{column('created_by')} = %(creator)s")
    created_at = reading.request.columns.index(_column(ApprovalRequest, "created_at"))
    pk = reading.request.columns.index(cast(str, meta.pk.column))
    status_at = reading.status
    votes = ", ".join(f"v.{c}" for c in reading.votes.columns)
    of_run = f" JOIN {run.db_table} run ON run.{run.pk.column} = {column('run')}"
    filtered = where_clause(where)
    # The listing's count, a subquery of its own (a window would read every row).
    count = (
        f"(SELECT COUNT(*) FROM {meta.db_table} r"
        + (of_run if "run_id" in shape.named else "")
        + f"{filtered})"
    )
    return (
        f"SELECT p.*, CASE WHEN p.rule IS NOT NULL THEN COALESCE((SELECT json_agg(json_build_array("
        f"{votes}, vu.{_column(get_user_model(), get_user_model().USERNAME_FIELD)})"
        f" ORDER BY v.{_column(Vote, 'at')}, v.{vote.pk.column})"
        f" FROM {vote.db_table} v LEFT JOIN {user.db_table} vu"
        f" ON vu.{user.pk.column} = v.{_column(Vote, 'by')}"
        f" WHERE v.{_column(Vote, 'request')} = p.c{pk}), '[]') END"
        f" FROM (SELECT {reading.request.select('r')}, {reading.runs.select('run', reading.run)},"
        f" {reading.users.select('u', reading.user)},"
        f" CASE WHEN {overdue} THEN '{Status.EXPIRED.value}' ELSE {state} END AS c{status_at},"
        f" {count} AS c{status_at + 1}, {column('rule')} AS rule"
        f" FROM {meta.db_table} r{of_run}"
        f" LEFT JOIN {user.db_table} u ON u.{user.pk.column} = {column('decided_by')}"
        f"{filtered} ORDER BY {column('created_at')}, r.{meta.pk.column} LIMIT %(limit)s OFFSET %(offset)s) p"
        f" ORDER BY p.c{created_at}, p.c{pk}"
    )
