"""Budgets: caps on usage that hold under any concurrency (the docs' "Budgets").

A budget belongs to a run, or to a user and then covers every run the user
created; it caps any of the usage counters ``requests``, ``input_tokens``,
``output_tokens`` and ``total_tokens``, and a user's may reset every
``"day"`` or ``"month"`` (calendar periods in UTC, by the database clock).
``runs.add_usage`` enforces them inside its one atomic operation: an add that
would take any covering budget past a cap adds nothing and raises
``BudgetExceeded``; otherwise the run's usage and every covering budget move
together.

Setting a budget takes a mapping of caps: the counters it names are set (an
integer from 0 to 2**63 - 1, or ``None`` for no cap), the others are left as
they are. A user's budget also takes ``period`` (``None``, ``"day"`` or
``"month"``); a new budget, or a new period, counts from 0. Reading one gives
a ``BudgetState``: its caps, what is used and what remains, and for a user's
its period and when it resets. The functions check their arguments and leave
the rest to the backend; the ``budget.set`` signal goes out after commit.
"""

import enum
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser

from agentstate import events
from agentstate.backends import BudgetState, backend
from agentstate.exceptions import BadInput
from agentstate.models import Budget
from agentstate.types import Reach
from agentstate.validation import text_problem

from .acting import By, acting
from .runs import RunRef, run_id_of

__all__ = [
    "COUNTERS",
    "KEEP",
    "MAX_CAP",
    "PERIODS",
    "BudgetState",
    "as_json",
    "check_caps",
    "check_period",
    "run_budget",
    "set_run_budget",
    "set_user_budget",
    "user_budget",
]

COUNTERS = Budget.COUNTERS
PERIODS = (Budget.Period.DAY.value, Budget.Period.MONTH.value)
# The largest cap a counter's column holds (a 64-bit integer).
MAX_CAP = 2**63 - 1

UserRef = AbstractBaseUser | str


class Keep(enum.Enum):
    """``set_user_budget(period=KEEP)``: the period as it is."""

    KEEP = "keep"


KEEP = Keep.KEEP


def check_caps(value: Any) -> dict[str, int | None]:
    """A mapping of some counters to caps, each ``None`` or an integer 0 .. 2**63 - 1."""
    if not isinstance(value, Mapping):
        raise BadInput("The caps must be an object keyed by counter.", field="caps")
    checked: dict[str, int | None] = {}
    for name, cap in value.items():
        if name not in COUNTERS:
            raise BadInput(
                f"{name}: unknown counter; the counters are {', '.join(COUNTERS)}.",
                field=str(name),
            )
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int)):
            raise BadInput(f"{name} must be an integer or null.", field=name)
        if cap is not None and not 0 <= cap <= MAX_CAP:
            raise BadInput(f"{name} must be from 0 to 2**63 - 1.", field=name)
        checked[name] = cap
    return checked


def check_period(value: Any) -> str:
    """``None``, ``"day"`` or ``"month"``, as stored (``""`` for none)."""
    if value is None:
        return ""
    if value not in PERIODS:
        raise BadInput('period must be null, "day" or "month".', field="period")
    return str(value)


def _username(user: Any) -> str:
    """The username of a user, or a username given as it is."""
    name = user if isinstance(user, str) else getattr(user, "get_username", lambda: None)()
    if not isinstance(name, str):
        raise BadInput("user must be a user or a username.", field="username")
    problem = text_problem(name)
    if problem:
        raise BadInput(f"username {problem}.", field="username")
    return name


def run_budget(run: RunRef, *, reach: Reach | None = None) -> BudgetState:
    """The run's budget: its caps, ``used`` (the run's usage) and ``remaining``."""
    return backend().run_budget(run_id_of(run), reach)


def set_run_budget(
    run: RunRef,
    caps: Mapping[str, int | None],
    *,
    by: By = None,
    reach: Reach | None = None,
) -> BudgetState:
    """Set the counters ``caps`` names on the run's budget (made if it has none);
    ``None`` removes a cap. ``by``: who, as the ``budget.set`` event records."""
    checked = check_caps(caps)
    changed = backend().set_run_budget(run_id_of(run), checked, reach, acting(by))
    events.announce(changed.events, Budget, changed.value.budget)
    return changed.value


def user_budget(user: UserRef) -> BudgetState:
    """The budget of ``user`` (a user or a username; unknown: ``UserNotFound``) over
    every run it created, as it stands now: a period that is over reads as used 0."""
    return backend().user_budget(_username(user))


def set_user_budget(
    user: UserRef,
    caps: Mapping[str, int | None] | None = None,
    *,
    period: str | None | Keep = KEEP,
    by: By = None,
) -> BudgetState:
    """Set the counters ``caps`` names on the user's budget (made if it has none), and
    its ``period`` unless ``KEEP``: ``None`` (never resets), ``"day"`` or ``"month"``.
    A new budget, or a changed period, counts from 0 from now on."""
    checked = check_caps({} if caps is None else caps)
    stored = None if period is KEEP else check_period(period)
    changed = backend().set_user_budget(_username(user), checked, stored, acting(by))
    events.announce(changed.events, Budget, changed.value.budget)
    return changed.value


def as_json(state: BudgetState) -> dict[str, Any]:
    """``{"caps", "used", "remaining"}``, and a user's ``"period"`` (``None``, ``"day"``
    or ``"month"``) and ``"resets_at"`` (the start of the next period, or ``None``)."""
    answer: dict[str, Any] = {
        "caps": state.caps,
        "used": state.used,
        "remaining": state.remaining,
    }
    if state.kind == "user":
        answer["period"] = state.period or None
        answer["resets_at"] = state.resets_at
    return answer
