"""Budgets on the ORM: a run's caps read under the run's row lock, a user's row locked next.

Setting a run's budget locks the run's row first, as every change of a run
does, so ``add_usage`` (which holds that lock) reads the run's caps as they
are. A user's budget row is locked by ``add_usage`` after the run's row, and
by setting it alone: one order, no deadlock. Periods are calendar days and
months in UTC by the database clock (``Now()`` truncated in the database);
a period that is over is rolled over (its counters zeroed, its start moved
to the current period's) by the next add or change, and read as rolled over
before that.
"""

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from django.db.models.functions import Now, TruncDay, TruncMonth

from agentstate.backends import events
from agentstate.backends.base import BudgetState, Changed
from agentstate.exceptions import BudgetExceeded, UserNotFound
from agentstate.models import Budget, Event, Run
from agentstate.types import Actor, Reach

from .operations import Operations

COUNTERS = Budget.COUNTERS
MAX_TOTAL = 2**63 - 1


def with_period_bounds(budgets: QuerySet[Budget]) -> QuerySet[Budget]:
    """Annotates the starts of the database clock's current UTC day and month."""
    return budgets.annotate(
        day_start=TruncDay(Now(), tzinfo=dt.UTC), month_start=TruncMonth(Now(), tzinfo=dt.UTC)
    )


def _current_start(budget: Budget) -> dt.datetime | None:
    """The start of the current period of a budget annotated by ``with_period_bounds``."""
    bounds: dict[str, dt.datetime] = {
        Budget.Period.DAY: budget.day_start,  # type: ignore[attr-defined]  # annotated
        Budget.Period.MONTH: budget.month_start,  # type: ignore[attr-defined]
    }
    return bounds.get(budget.period)


def _next_start(period: str, start: dt.datetime) -> dt.datetime:
    if period == Budget.Period.DAY:
        return start + dt.timedelta(days=1)
    return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)


def roll_over(budget: Budget) -> bool:
    """Zero the counters of a budget (annotated) whose period is over, its start moved to
    the current period's; whether it did."""
    start = _current_start(budget)
    if start is None or budget.period_start >= start:
        return False
    for name in COUNTERS:
        setattr(budget, f"used_{name}", 0)
    budget.period_start = start
    return True


def refuse_past_caps(
    kind: str, caps: dict[str, int | None], used: dict[str, int], increments: dict[str, int]
) -> None:
    """``BudgetExceeded`` for the first capped counter that ``increments`` take past its cap."""
    for name in COUNTERS:
        cap = caps[name]
        if cap is not None and used[name] + increments[name] > cap:
            raise BudgetExceeded.of(
                budget=kind, counter=name, increment=increments[name], cap=cap, used=used[name]
            )


def _run_state(run: Run, budget: Budget | None) -> BudgetState:
    caps = budget.caps if budget is not None else dict.fromkeys(COUNTERS)
    return BudgetState(
        "run", caps, {name: getattr(run, name) for name in COUNTERS}, "", None, budget
    )


def _user_state(budget: Budget | None) -> BudgetState:
    """A user's budget (annotated, rolled over) as it stands."""
    if budget is None:
        return BudgetState("user", dict.fromkeys(COUNTERS), dict.fromkeys(COUNTERS, 0))
    start = _current_start(budget)
    resets_at = None if start is None else _next_start(budget.period, start)
    return BudgetState("user", budget.caps, budget.used, budget.period, resets_at, budget)


def _changed_event(
    budget: Budget, object_id: str, created_by_id: int | None, by: Actor, **about: str
) -> Event:
    return events.new(
        "budget.set",
        Budget,
        object_id,
        by,
        created_by_id=created_by_id,
        details={"caps": budget.caps, "period": budget.period or None, **about},
    )


def _settings(budget: Budget) -> tuple[Any, ...]:
    return (budget.period, *budget.caps.values())


class BudgetOperations(Operations):
    # RunOperations' run lookup (``ORMBackend`` combines both).
    _run: Callable[..., Run]

    def run_budget(self, run_id: str, reach: Reach | None) -> BudgetState:
        return self.atomic(self._run_budget, run_id, reach)

    def _run_budget(self, run_id: str, reach: Reach | None) -> BudgetState:
        run = self._run(run_id, reach)
        return _run_state(run, self.rows(Budget).filter(run=run).first())

    def set_run_budget(
        self, run_id: str, caps: dict[str, int | None], reach: Reach | None, by: Actor
    ) -> Changed[BudgetState]:
        return self.atomic(self._set_run_budget, run_id, caps, reach, by)

    def _set_run_budget(
        self, run_id: str, caps: dict[str, int | None], reach: Reach | None, by: Actor
    ) -> Changed[BudgetState]:
        run = self._run(run_id, reach, lock=True)  # the run's row first
        budget = self.rows(Budget).filter(run=run).first()
        before = None if budget is None else _settings(budget)
        if budget is None:
            budget = Budget(run=run)
        for name, cap in caps.items():
            setattr(budget, f"max_{name}", cap)
        if before == _settings(budget):
            return Changed(_run_state(run, budget), [])
        budget.save(using=self.alias)
        event = _changed_event(
            budget, f"run:{run.run_id}", run.created_by_id, by, run_id=run.run_id
        )
        events.save(self.alias, [event])
        return Changed(_run_state(run, budget), [event])

    def _budget_user_id(self, username: str) -> int:
        found = self.user_pk(username)
        if found is None:
            raise UserNotFound.of(username=username)
        return int(found)

    def user_budget(self, username: str) -> BudgetState:
        return self.atomic(self._user_budget, username)

    def _user_budget(self, username: str) -> BudgetState:
        user_id = self._budget_user_id(username)
        budget = with_period_bounds(self.rows(Budget).filter(user_id=user_id)).first()
        if budget is not None:
            roll_over(budget)  # as read; written by the next add or change
        return _user_state(budget)

    def set_user_budget(
        self, username: str, caps: dict[str, int | None], period: str | None, by: Actor
    ) -> Changed[BudgetState]:
        return self.atomic(self._set_user_budget, username, caps, period, by)

    def _set_user_budget(
        self, username: str, caps: dict[str, int | None], period: str | None, by: Actor
    ) -> Changed[BudgetState]:
        user_id = self._budget_user_id(username)
        locked = with_period_bounds(self.rows(Budget).select_for_update().filter(user_id=user_id))
        budget = locked.first()
        created = budget is None
        if budget is None:
            # an upsert: a concurrent first setter's row may be there by now
            self.rows(Budget).bulk_create([Budget(user_id=user_id)], ignore_conflicts=True)
            budget = locked.get()
        before = _settings(budget)
        rolled = roll_over(budget)
        for name, cap in caps.items():
            setattr(budget, f"max_{name}", cap)
        if period is not None and period != budget.period:
            budget.period = period
            for name in COUNTERS:
                setattr(budget, f"used_{name}", 0)
            budget.period_start = Now()  # the database's clock
        changed = created or before != _settings(budget)
        if changed or rolled:
            budget.save(using=self.alias)
            budget = with_period_bounds(self.rows(Budget).filter(pk=budget.pk)).get()
        if not changed:
            return Changed(_user_state(budget), [])
        event = _changed_event(budget, f"user:{username}", user_id, by, username=username)
        events.save(self.alias, [event])
        return Changed(_user_state(budget), [event])
