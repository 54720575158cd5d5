"""Oversight on PostgreSQL: ``consume`` (``sql/30_runs.sql``) and each batch of the
deadlines' sweep (``sql/40_sweep.sql``) one call each; the approval rules,
changed rarely and by staff, in the ORM's form (``backends.orm.oversight``: one
transaction each)."""

from collections.abc import Callable
from typing import Any

from agentstate.backends.base import Changed
from agentstate.backends.events import from_json as events_from_json
from agentstate.backends.orm.oversight import OversightOperations as ORMOversight
from agentstate.models import ApprovalRequest
from agentstate.types import DEADLINE_REASON, RULE_ACTOR, SWEEPER, Actor, Reach


class OversightOperations(ORMOversight):
    call: Callable[..., dict[str, Any]]
    _request: Callable[[dict[str, Any]], ApprovalRequest]

    def consume(
        self, run_id: str, tool_name: str, call_id: str, digest: str, reach: Reach | None, by: Actor
    ) -> Changed[ApprovalRequest]:
        result = self.call(
            "consume",
            p_run_id=run_id,
            p_tool=tool_name,
            p_call=call_id,
            p_digest=digest,
            p_reach=None if reach is None else reach.user_id,
            p_user=by.user_id,
            p_actor=by.name,
        )
        return Changed(self._request(result), events_from_json(result["events"], self.alias))

    def apply_deadlines(self, size: int, after: Any = None) -> Changed[int]:
        deadline, pk = after or (None, None)
        result = self.call(
            "apply_deadlines",
            p_size=size,
            p_sweeper=SWEEPER.name,
            p_rule_actor=RULE_ACTOR,
            p_reason=DEADLINE_REASON,
            p_after_deadline=deadline,
            p_after_id=pk,
        )
        return Changed(
            result["count"], events_from_json(result["events"], self.alias), result["after"]
        )
