"""Runs, usage and approvals on PostgreSQL: ``sql/30_runs.sql``."""

import functools
from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.db import connections

from agentstate.backends.base import Changed
from agentstate.backends.events import from_json as events_from_json
from agentstate.db import Json, cursor, decoded, from_json, group_membership
from agentstate.models import ApprovalRequest, Run
from agentstate.policies import DECIDED_BY_POLICY, POLICY_ACTOR
from agentstate.records import DECIDED_BY_RECORDS
from agentstate.types import Actor, Reach, Records, Verdict, arguments_digest


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
        request = from_json(ApprovalRequest, result["request"], self.alias)
        request.run = from_json(Run, result["run"], self.alias)
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
    status, created_at = meta.get_field("status").column, meta.get_field("created_at").column
    pending, expired = ApprovalRequest.Status.PENDING.value, ApprovalRequest.Status.EXPIRED.value
    return (
        f"SELECT to_jsonb(r), to_jsonb(run), to_jsonb(u),"
        f" CASE WHEN r.{status} = '{pending}'"
        f" AND r.{created_at} <= STATEMENT_TIMESTAMP() - %s::interval"
        f" THEN '{expired}' ELSE r.{status} END"
        f" FROM {meta.db_table} r"
        f" JOIN {run.db_table} run ON run.{run.pk.column} = r.{meta.get_field('run').column}"
        f" LEFT JOIN {user.db_table} u"
        f" ON u.{user.pk.column} = r.{meta.get_field('decided_by').column}"
        f" WHERE r.{meta.pk.column} = %s"
        f" AND (%s::bigint IS NULL OR r.{meta.get_field('created_by').column} = %s::bigint)"
    )
