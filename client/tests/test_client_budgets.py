"""The REST client's budget calls against a live server, and the refusal an add gets."""

import pytest

from agentstate_client import KEEP, BudgetExceeded, PermissionDenied, RunNotFound, UserNotFound

pytestmark = pytest.mark.django_db(transaction=True)

UNCAPPED = {"requests": None, "input_tokens": None, "output_tokens": None, "total_tokens": None}


def test_budgets_are_read_and_set_and_an_add_past_one_is_refused(ac, remote, make_user):
    setter = remote(make_user("setter", "agentstate.change_budget"))
    ac.create_run("run-1")
    assert ac.run_budget("run-1")["caps"] == UNCAPPED
    with pytest.raises(PermissionDenied):
        ac.set_run_budget("run-1", total_tokens=10)
    budget = setter.set_run_budget("run-1", total_tokens=10, requests=None)
    assert budget["caps"] == {**UNCAPPED, "total_tokens": 10}
    user = setter.set_user_budget("alice", requests=2, period="day")
    assert (user["period"], user["caps"]["requests"], user["resets_at"] is not None) == (
        "day",
        2,
        True,
    )
    assert setter.set_user_budget("alice", period=KEEP)["period"] == "day"
    ac.add_usage("run-1", input_tokens=10)
    with pytest.raises(BudgetExceeded) as caught:
        ac.add_usage("run-1", input_tokens=1)
    error = caught.value
    assert (error.status, error.code, error.budget, error.counter) == (
        409,
        "budget_exceeded",
        "run",
        "total_tokens",
    )
    assert ac.user_budget("alice")["used"]["requests"] == 1
    assert ac.run_budget("run-1")["remaining"]["total_tokens"] == 0
    with pytest.raises(UserNotFound):
        setter.user_budget("nobody")
    with pytest.raises(RunNotFound):
        setter.set_run_budget("nope", requests=1)
    with pytest.raises(PermissionDenied):
        remote(make_user("stranger")).user_budget("alice")
