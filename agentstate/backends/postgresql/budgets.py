"""Budgets on PostgreSQL: ``sql/36_budgets.sql`` (their enforcement: ``agentstate_add_usage``)."""

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db.models import DateTimeField

from agentstate.backends.base import BudgetState, Changed
from agentstate.backends.events import from_json as events_from_json
from agentstate.db import Json, from_json
from agentstate.models import Budget
from agentstate.types import Actor, Reach

COUNTERS = Budget.COUNTERS


def _creator(reach: Reach | None) -> int | None:
    return None if reach is None else reach.user_id


class BudgetOperations:
    alias: str
    call: Callable[..., dict[str, Any]]

    def _state(self, kind: str, result: dict[str, Any]) -> BudgetState:
        """``{"budget", "used", "resets_at"}`` as a function answered it."""
        row = result["budget"]
        budget = None if row is None else from_json(Budget, row, self.alias)
        caps = dict.fromkeys(COUNTERS) if budget is None else budget.caps
        resets_at: datetime | None = (
            None if result["resets_at"] is None else DateTimeField().to_python(result["resets_at"])
        )
        used = {name: int(result["used"][name]) for name in COUNTERS}
        period = "" if budget is None else budget.period
        return BudgetState(kind, caps, used, period, resets_at, budget)

    def run_budget(self, run_id: str, reach: Reach | None) -> BudgetState:
        return self._state("run", self.call("run_budget", p_run_id=run_id, p_reach=_creator(reach)))

    def set_run_budget(
        self, run_id: str, caps: dict[str, int | None], reach: Reach | None, by: Actor
    ) -> Changed[BudgetState]:
        result = self.call(
            "set_run_budget",
            p_run_id=run_id,
            p_caps=Json(caps),
            p_reach=_creator(reach),
            p_user=by.user_id,
            p_actor=by.name,
        )
        return Changed(self._state("run", result), events_from_json(result["events"], self.alias))

    def user_budget(self, username: str) -> BudgetState:
        return self._state("user", self.call("user_budget", p_username=username))

    def set_user_budget(
        self, username: str, caps: dict[str, int | None], period: str | None, by: Actor
    ) -> Changed[BudgetState]:
        result = self.call(
            "set_user_budget",
            p_username=username,
            p_caps=Json(caps),
            p_period=period,
            p_user=by.user_id,
            p_actor=by.name,
        )
        return Changed(self._state("user", result), events_from_json(result["events"], self.alias))
