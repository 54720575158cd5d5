"""Budgets under real concurrency: threads with their own connections (docs/concepts.md,
"Budgets").

Twenty workers add 100 times each against a cap of 1,000 tokens: exactly the
cap is used and every other add is refused, on PostgreSQL (row locks in one
statement) and on SQLite (IMMEDIATE transactions). The figures are printed.
"""

import time

import pytest
from rest_framework.test import APIClient

from agentstate.exceptions import BudgetExceeded
from agentstate.models import Budget, Run
from agentstate.services import budgets, runs

pytestmark = pytest.mark.django_db(transaction=True)

WORKERS = 20
ADDS = 100
CAP = 1000
RUNS = 5  # the runs of one user sharing the user's budget


def database(is_postgres: bool) -> str:
    return "PostgreSQL" if is_postgres else "SQLite"


def race(concurrently, add) -> tuple[int, list, float]:
    """Each worker calls ``add(i)`` ADDS times; (adds taken, refusals, seconds)."""

    def work(i: int) -> tuple[int, list]:
        taken, refused = 0, []
        for _ in range(ADDS):
            try:
                add(i)
                taken += 1
            except BudgetExceeded as error:
                refused.append(error)
        return taken, refused

    started = time.perf_counter()
    results = concurrently(WORKERS, work)
    elapsed = time.perf_counter() - started
    errors = [r for r in results if not isinstance(r, tuple)]
    assert errors == [], errors
    return sum(r[0] for r in results), [e for r in results for e in r[1]], elapsed


def report(what: str, is_postgres: bool, taken: int, refused: int, used: int, seconds: float):
    print(
        f"\nbudget race, {what} ({database(is_postgres)}): {WORKERS} workers x {ADDS} adds ="
        f" {WORKERS * ADDS} attempted, {taken} accepted, {refused} refused, final used"
        f" {used} of a cap of {CAP}, in {seconds:.2f}s"
    )


def test_twenty_workers_against_a_run_budget_use_exactly_the_cap(concurrently, is_postgres):
    runs.create_run("capped")
    budgets.set_run_budget("capped", {"total_tokens": CAP})

    taken, refused, seconds = race(concurrently, lambda i: runs.add_usage("capped", input_tokens=1))
    usage = Run.objects.get(run_id="capped").usage
    report("a run's budget", is_postgres, taken, len(refused), usage["total_tokens"], seconds)
    assert (taken, len(refused)) == (CAP, WORKERS * ADDS - CAP)
    assert {(e.budget, e.counter, e.code) for e in refused} == {
        ("run", "total_tokens", "budget_exceeded")
    }
    assert usage["total_tokens"] == usage["input_tokens"] == usage["requests"] == CAP
    assert budgets.run_budget("capped").remaining["total_tokens"] == 0


def test_twenty_workers_on_several_runs_of_one_user_share_its_budget_exactly(
    concurrently, is_postgres, alice
):
    budgets.set_user_budget(alice, {"total_tokens": CAP}, period="day")
    for n in range(RUNS):
        runs.create_run(f"shared-{n}", user=alice)

    taken, refused, seconds = race(
        concurrently, lambda i: runs.add_usage(f"shared-{i % RUNS}", output_tokens=1)
    )
    used = Budget.objects.get(user=alice).used
    totals = [run.total_tokens for run in Run.objects.filter(created_by=alice)]
    report(
        f"a user's budget over {RUNS} runs",
        is_postgres,
        taken,
        len(refused),
        used["total_tokens"],
        seconds,
    )
    assert (taken, len(refused)) == (CAP, WORKERS * ADDS - CAP)
    assert {(e.budget, e.counter) for e in refused} == {("user", "total_tokens")}
    assert used == {"requests": CAP, "input_tokens": 0, "output_tokens": CAP, "total_tokens": CAP}
    assert sum(totals) == CAP, "the runs' usage and the user's budget moved apart"


def test_twenty_rest_clients_get_409_budget_exceeded_past_the_shared_cap(
    concurrently, is_postgres, alice, make_user
):
    setter = make_user("setter", "agentstate.change_budget")
    api = APIClient()
    api.force_authenticate(setter)
    assert (
        api.put("/api/users/alice/budget/", {"total_tokens": CAP}, format="json").status_code == 200
    )
    for n in range(RUNS):
        runs.create_run(f"rest-{n}", user=alice)
    statuses: list[list[tuple[int, str]]] = [[] for _ in range(WORKERS)]

    def work(i: int) -> None:
        client = APIClient()
        client.force_authenticate(alice)
        for _ in range(ADDS):
            response = client.post(
                f"/api/runs/rest-{i % RUNS}/usage/", {"input_tokens": 1}, format="json"
            )
            statuses[i].append((response.status_code, response.json().get("code", "")))

    started = time.perf_counter()
    results = concurrently(WORKERS, work)
    seconds = time.perf_counter() - started
    assert [r for r in results if r is not None] == []
    answers = [answer for worker in statuses for answer in worker]
    taken = sum(1 for status, _ in answers if status == 200)
    refused = [answer for answer in answers if answer[0] != 200]
    body = api.get("/api/users/alice/budget/").json()
    report(
        "a user's budget over REST",
        is_postgres,
        taken,
        len(refused),
        body["used"]["total_tokens"],
        seconds,
    )
    assert (taken, len(refused)) == (CAP, WORKERS * ADDS - CAP)
    assert set(refused) == {(409, "budget_exceeded")}
    assert body["used"]["total_tokens"] == CAP and body["remaining"]["total_tokens"] == 0


def test_setting_caps_while_adding_never_deadlocks_and_keeps_budgets_with_the_runs(
    concurrently, alice
):
    """Setters of the run's and the user's budget race the adders: every lock is taken in
    one order (the run's row, then the user's budget), so nothing deadlocks, and what the
    user's budget counts stays the sum of what its runs were given."""
    budgets.set_user_budget(alice, {"requests": 10})
    for n in range(2):
        runs.create_run(f"mixed-{n}", user=alice)

    def work(i: int) -> None:
        for n in range(30):
            if i == 0:
                budgets.set_user_budget(alice, {"requests": 10 + 5 * n})
            elif i == 1:
                budgets.set_run_budget(f"mixed-{n % 2}", {"requests": 40 + n})
            else:
                try:
                    runs.add_usage(f"mixed-{i % 2}", input_tokens=2)
                except BudgetExceeded:
                    pass

    results = concurrently(6, work)
    assert [r for r in results if r is not None] == []
    used = Budget.objects.get(user=alice).used
    mine = Run.objects.filter(created_by=alice)
    assert used["requests"] == sum(run.requests for run in mine) <= 10 + 5 * 29
    assert used["input_tokens"] == sum(run.input_tokens for run in mine) == 2 * used["requests"]
