"""Runs, usage and approvals on PostgreSQL: ``sql/30_runs.sql``."""

from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

from agentstate.backends.base import Changed
from agentstate.backends.events import from_json as events_from_json
from agentstate.db import Json, from_json
from agentstate.models import ApprovalRequest, Run
from agentstate.policies import DECIDED_BY_POLICY, POLICY_ACTOR
from agentstate.records import DECIDED_BY_RECORDS
from agentstate.types import Actor, Reach, Records


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
        return self._run(self.call("create_run", run_id, Json(context), created_by_id))

    def run(self, run_id: str, reach: Reach | None) -> Run:
        return self._run(self.call("get_run", run_id, _creator(reach)))

    def update_run(self, run_id: str, context: Any, reach: Reach | None) -> Run:
        return self._run(self.call("update_run", run_id, Json(context), _creator(reach)))

    def add_usage(
        self, run_id: str, increments: dict[str, int], reach: Reach | None
    ) -> dict[str, int]:
        counters = [increments[name] for name in Run.USAGE_FIELDS]
        totals = self.call("add_usage", run_id, *counters, _creator(reach))
        return {name: totals[name] for name in Run.USAGE_FIELDS}

    def records(self, run_id: str, reach: Reach | None) -> Records:
        return dict(self.call("records", run_id, _creator(reach)))

    def is_tool_approved(
        self, run_id: str, tool_name: str, call_id: str, arguments: Any, reach: Reach | None
    ) -> bool | None:
        result = self.call(
            "is_tool_approved",
            run_id,
            tool_name,
            call_id,
            None if arguments is None else Json(arguments),
            _creator(reach),
        )
        return cast(bool | None, result["approved"])

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
            run_id,
            tool_name,
            call_id,
            approve,
            always,
            reason,
            _creator(reach),
            by.user_id,
            by.name,
        )
        return Changed(self._run(result), events_from_json(result["events"], self.alias))

    def rebuild_approvals(
        self, run_id: str, records: Records, reach: Reach | None, by: Actor
    ) -> Changed[Run]:
        result = self.call(
            "rebuild_approvals", run_id, Json(records), _creator(reach), by.user_id, by.name
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
            run_id,
            tool_name,
            call_id,
            None if arguments is None else Json(arguments),
            DECIDED_BY_RECORDS,
            DECIDED_BY_POLICY,
            POLICY_ACTOR,
            approval_ttl,
            _creator(reach),
            by.user_id,
            by.name,
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
            request_id,
            approve,
            always,
            reason,
            None if arguments is None else Json(arguments),
            approval_ttl,
            by.user_id,
            by.name,
        )
        return Changed(self._request(result), events_from_json(result["events"], self.alias))
