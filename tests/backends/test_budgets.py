"""Budgets (docs/concepts.md, "Budgets"): caps of a run or of every run of a user,
enforced by add_usage, set and read through the Python API, REST and the admin.

The races are in tests/concurrency/test_budgets_concurrency.py; the one-round-trip counts in
tests/backends/test_runs_queries.py; who may read and set them in tests/api/test_access.py.
"""

import datetime as dt

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models.functions import Now
from django.test import Client
from django.utils import timezone

from agentstate import signals
from agentstate.admin.budgets import UserBudgetInline, add_user_budget_inline
from agentstate.exceptions import BadInput, BudgetExceeded, UsageOverflow, UserNotFound
from agentstate.models import Budget, Event, Run
from agentstate.services import budgets, runs
from tests.hardening import row_counts

pytestmark = pytest.mark.django_db

UNCAPPED = dict.fromkeys(Budget.COUNTERS)
NOTHING = dict.fromkeys(Budget.COUNTERS, 0)


@pytest.fixture
def boss(make_user):
    return make_user("boss", "agentstate.change_budget")


def usage_of(run: Run) -> dict[str, int]:
    return Run.objects.get(pk=run.pk).usage


def stored_used(user) -> dict[str, int]:
    return Budget.objects.get(user=user).used


# The Python API: a run's budget


def test_a_run_without_a_budget_reads_uncapped_with_its_usage(alice):
    run = runs.create_run("r", user=alice)
    runs.add_usage(run, input_tokens=3, output_tokens=4)
    state = budgets.run_budget(run)
    assert state.caps == UNCAPPED and state.remaining == UNCAPPED and state.budget is None
    assert state.used == {"requests": 1, "input_tokens": 3, "output_tokens": 4, "total_tokens": 7}
    assert budgets.as_json(state) == {
        "caps": UNCAPPED,
        "used": state.used,
        "remaining": UNCAPPED,
    }


def test_an_add_reaching_the_cap_exactly_is_taken_one_past_it_is_refused(alice):
    run = runs.create_run("r", user=alice)
    budgets.set_run_budget(run, {"total_tokens": 100, "requests": 10})
    runs.add_usage(run, input_tokens=60, output_tokens=40)  # total 100: exactly the cap
    before = usage_of(run)
    with pytest.raises(BudgetExceeded) as refused:
        runs.add_usage(run, input_tokens=1)
    error = refused.value
    assert (error.status, error.code, error.budget, error.counter) == (
        409,
        "budget_exceeded",
        "run",
        "total_tokens",
    )
    assert error.detail == (
        "Adding 1 total_tokens would exceed the run budget's cap of 100 (100 used);"
        " nothing was added."
    )
    assert usage_of(run) == before, "a refused add added something"
    state = budgets.run_budget(run)
    assert state.remaining == {**UNCAPPED, "requests": 9, "total_tokens": 0}


def test_every_capped_counter_is_checked_in_order_and_the_first_names_the_refusal(alice):
    run = runs.create_run("r", user=alice)
    budgets.set_run_budget(run, {"requests": 1, "output_tokens": 5})
    runs.add_usage(run, output_tokens=5)
    with pytest.raises(BudgetExceeded) as refused:
        runs.add_usage(run, output_tokens=1)  # passes both: requests is named first
    assert refused.value.counter == "requests"
    with pytest.raises(BudgetExceeded) as refused:
        runs.add_usage(run, requests=0, output_tokens=1)
    assert refused.value.counter == "output_tokens"
    runs.add_usage(run, requests=0, input_tokens=1000)  # uncapped counters move freely
    assert usage_of(run)["input_tokens"] == 1000


def test_total_tokens_is_what_add_usage_computes(alice):
    run = runs.create_run("r", user=alice)
    budgets.set_run_budget(run, {"total_tokens": 10})
    with pytest.raises(BudgetExceeded):
        runs.add_usage(run, input_tokens=6, output_tokens=5)  # total 11 by default
    runs.add_usage(run, input_tokens=6, output_tokens=5, total_tokens=3)  # as given
    assert usage_of(run)["total_tokens"] == 3


def test_a_cap_lowered_below_what_is_used_refuses_every_add_and_remaining_is_zero(alice):
    run = runs.create_run("r", user=alice)
    runs.add_usage(run, input_tokens=50)
    state = budgets.set_run_budget(run, {"input_tokens": 20})
    assert state.remaining["input_tokens"] == 0 and state.used["input_tokens"] == 50
    with pytest.raises(BudgetExceeded):
        runs.add_usage(run, requests=0)  # 50 + 0 is still past 20
    budgets.set_run_budget(run, {"input_tokens": None})
    runs.add_usage(run, input_tokens=1)
    assert usage_of(run)["input_tokens"] == 51


def test_setting_changes_only_the_counters_given_and_null_removes_a_cap(alice):
    run = runs.create_run("r", user=alice)
    budgets.set_run_budget(run, {"requests": 3, "total_tokens": 9})
    state = budgets.set_run_budget(run, {"total_tokens": None, "input_tokens": 0})
    assert state.caps == {
        "requests": 3,
        "input_tokens": 0,
        "output_tokens": None,
        "total_tokens": None,
    }
    assert budgets.set_run_budget(run, {}).caps == state.caps
    assert Budget.objects.get(run=run).caps == state.caps


@pytest.mark.parametrize(
    "caps, field",
    [
        ({"requests": -1}, "requests"),
        ({"requests": 2**63}, "requests"),
        ({"requests": True}, "requests"),
        ({"requests": "5"}, "requests"),
        ({"requests": 1.0}, "requests"),
        ({"cached_tokens": 5}, "cached_tokens"),
        ({"tokens": 5}, "tokens"),
        (["requests"], "caps"),
    ],
)
def test_bad_caps_are_bad_input_and_write_nothing(alice, caps, field):
    run = runs.create_run("r", user=alice)
    before = row_counts()
    with pytest.raises(BadInput) as refused:
        budgets.set_run_budget(run, caps)
    assert refused.value.field == field
    with pytest.raises(BadInput):
        budgets.set_user_budget(alice, caps)
    assert row_counts() == before


def test_the_largest_cap_is_taken(alice):
    run = runs.create_run("r", user=alice)
    top = 2**63 - 1
    assert budgets.set_run_budget(run, {"total_tokens": top}).caps["total_tokens"] == top
    runs.add_usage(run, input_tokens=2**53)
    assert budgets.run_budget(run).remaining["total_tokens"] == top - 2**53


# A user's budget: every run the user created


def test_a_user_budget_covers_every_run_of_the_user_and_no_one_elses(alice, bob):
    budgets.set_user_budget(alice, {"total_tokens": 100})
    first, second = (runs.create_run(f"a{i}", user=alice) for i in range(2))
    theirs = runs.create_run("b", user=bob)
    nobodys = runs.create_run("n")
    runs.add_usage(first, input_tokens=60)
    runs.add_usage(second, input_tokens=40)
    with pytest.raises(BudgetExceeded) as refused:
        runs.add_usage(second, input_tokens=1)
    assert (refused.value.budget, refused.value.counter) == ("user", "total_tokens")
    assert refused.value.detail == (
        "Adding 1 total_tokens would exceed the user budget's cap of 100 (100 used);"
        " nothing was added."
    )
    runs.add_usage(theirs, input_tokens=500)
    runs.add_usage(nobodys, input_tokens=500)
    state = budgets.user_budget("alice")
    assert state.used == {
        "requests": 2,
        "input_tokens": 100,
        "output_tokens": 0,
        "total_tokens": 100,
    }
    assert state.remaining["total_tokens"] == 0 and state.period == "" and state.resets_at is None
    assert usage_of(second)["input_tokens"] == 40


def test_a_user_budget_counts_from_when_it_was_set(alice):
    run = runs.create_run("r", user=alice)
    runs.add_usage(run, input_tokens=70)
    budgets.set_user_budget(alice, {"input_tokens": 50})
    runs.add_usage(run, input_tokens=50)
    assert budgets.user_budget(alice).used["input_tokens"] == 50
    assert usage_of(run)["input_tokens"] == 120


def test_the_run_budget_is_checked_first_and_a_refusal_moves_neither(alice):
    run = runs.create_run("r", user=alice)
    budgets.set_run_budget(run, {"requests": 2})
    budgets.set_user_budget(alice, {"requests": 2})
    runs.add_usage(run)
    runs.add_usage(run)
    with pytest.raises(BudgetExceeded) as refused:
        runs.add_usage(run)
    assert refused.value.budget == "run"
    other = runs.create_run("r2", user=alice)
    with pytest.raises(BudgetExceeded) as refused:
        runs.add_usage(other)
    assert refused.value.budget == "user"
    assert usage_of(other)["requests"] == 0 and stored_used(alice)["requests"] == 2


def test_a_refusal_by_the_user_budget_leaves_the_run_untouched(alice):
    run = runs.create_run("r", user=alice)
    budgets.set_run_budget(run, {"total_tokens": 1000})
    budgets.set_user_budget(alice, {"output_tokens": 5})
    before = (usage_of(run), stored_used(alice))
    with pytest.raises(BudgetExceeded):
        runs.add_usage(run, input_tokens=10, output_tokens=6)
    assert (usage_of(run), stored_used(alice)) == before


def test_a_user_budget_counter_past_the_column_is_usage_overflow(alice):
    run = runs.create_run("r", user=alice)
    budgets.set_user_budget(alice, {})
    Budget.objects.filter(user=alice).update(used_input_tokens=2**63 - 5)
    with pytest.raises(UsageOverflow) as refused:
        runs.add_usage(run, input_tokens=5)
    assert refused.value.field == "input_tokens" and usage_of(run)["input_tokens"] == 0


def test_an_unknown_user_is_not_found(db):
    with pytest.raises(UserNotFound) as refused:
        budgets.user_budget("nobody")
    assert (refused.value.status, refused.value.code) == (404, "user_not_found")
    before = row_counts()
    with pytest.raises(UserNotFound):
        budgets.set_user_budget("nobody", {"requests": 1}, period="day")
    assert row_counts() == before


def test_a_user_without_a_budget_reads_uncapped_and_unused(alice):
    runs.add_usage(runs.create_run("r", user=alice), input_tokens=5)
    state = budgets.user_budget(alice)
    assert (state.caps, state.used, state.period, state.resets_at) == (
        UNCAPPED,
        NOTHING,
        "",
        None,
    )
    assert budgets.as_json(state) == {
        "caps": UNCAPPED,
        "used": NOTHING,
        "remaining": UNCAPPED,
        "period": None,
        "resets_at": None,
    }


# Periods, by the database clock in UTC


def utc_day_start() -> dt.datetime:
    return timezone.now().astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def utc_month_start() -> dt.datetime:
    return utc_day_start().replace(day=1)


def test_a_daily_budget_resets_at_the_start_of_the_next_utc_day(alice):
    state = budgets.set_user_budget(alice, {"requests": 2}, period="day")
    assert state.period == "day" and state.resets_at == utc_day_start() + dt.timedelta(days=1)
    run = runs.create_run("r", user=alice)
    runs.add_usage(run)
    runs.add_usage(run)
    with pytest.raises(BudgetExceeded):
        runs.add_usage(run)
    # the period began yesterday: over, whether or not an add has rolled it over
    Budget.objects.filter(user=alice).update(period_start=Now() - dt.timedelta(days=1))
    assert budgets.user_budget(alice).used == NOTHING
    assert budgets.user_budget(alice).remaining["requests"] == 2
    runs.add_usage(run)
    stored = Budget.objects.get(user=alice)
    assert stored.used["requests"] == 1 and stored.period_start == utc_day_start()
    assert usage_of(run)["requests"] == 3


def test_a_monthly_budget_resets_at_the_start_of_the_next_utc_month(alice):
    state = budgets.set_user_budget(alice, {"total_tokens": 10}, period="month")
    start = utc_month_start()
    assert state.resets_at == start.replace(
        year=start.year + start.month // 12, month=start.month % 12 + 1
    )
    run = runs.create_run("r", user=alice)
    runs.add_usage(run, input_tokens=10)
    Budget.objects.filter(user=alice).update(period_start=start)  # still this month
    with pytest.raises(BudgetExceeded):
        runs.add_usage(run, input_tokens=1)
    Budget.objects.filter(user=alice).update(period_start=start - dt.timedelta(days=1))
    runs.add_usage(run, input_tokens=10)
    assert stored_used(alice)["total_tokens"] == 10


def test_a_refused_add_after_a_period_is_over_writes_nothing(alice):
    budgets.set_user_budget(alice, {"input_tokens": 5}, period="day")
    Budget.objects.filter(user=alice).update(
        period_start=Now() - dt.timedelta(days=3), used_input_tokens=4
    )
    before = list(Budget.objects.values())
    with pytest.raises(BudgetExceeded) as refused:
        runs.add_usage(runs.create_run("r", user=alice), input_tokens=6)
    assert "(0 used)" in refused.value.detail  # the new period's
    assert list(Budget.objects.values()) == before


def test_changing_the_period_starts_a_new_one_and_caps_alone_keep_the_count(alice):
    run = runs.create_run("r", user=alice)
    budgets.set_user_budget(alice, {"requests": 10})
    runs.add_usage(run)
    assert budgets.set_user_budget(alice, {"requests": 20}).used["requests"] == 1
    assert budgets.set_user_budget(alice, period=None).used["requests"] == 1  # unchanged
    state = budgets.set_user_budget(alice, period="day")
    assert state.used == NOTHING and state.period == "day" and state.caps["requests"] == 20
    runs.add_usage(run)
    assert budgets.set_user_budget(alice, {"requests": 5}).used["requests"] == 1
    assert budgets.set_user_budget(alice, period="month").used["requests"] == 0
    assert budgets.set_user_budget(alice, period=None).resets_at is None


@pytest.mark.parametrize("period", ["week", "", "DAY", 1, True])
def test_a_bad_period_is_bad_input(alice, period):
    before = row_counts()
    with pytest.raises(BadInput) as refused:
        budgets.set_user_budget(alice, {}, period=period)
    assert refused.value.field == "period" and row_counts() == before


# Events and signals


@pytest.mark.django_db(transaction=True)
def test_every_change_records_budget_set_and_sends_its_signal(alice, boss):
    got = []

    def receiver(sender, event, instance, **kwargs):
        got.append((sender, event.kind, event.object_id, event.details, instance))

    signals.budget_set.connect(receiver, weak=False, dispatch_uid="test-budgets")
    try:
        run = runs.create_run("r", user=alice)
        budgets.set_run_budget(run, {"requests": 3}, by=boss)
        budgets.set_user_budget(alice, {"total_tokens": 9}, period="day", by=boss)
        budgets.set_run_budget(run, {"requests": 3}, by=boss)  # nothing changes: no event
        budgets.set_user_budget(alice, {"total_tokens": 9}, period="day", by=boss)
        runs.add_usage(run)
        with pytest.raises(BudgetExceeded):
            runs.add_usage(run, input_tokens=10)
    finally:
        signals.budget_set.disconnect(dispatch_uid="test-budgets")
    caps = {**UNCAPPED, "requests": 3}
    assert [(g[0], g[1], g[2], g[3]) for g in got] == [
        (Budget, "budget.set", "run:r", {"caps": caps, "period": None, "run_id": "r"}),
        (
            Budget,
            "budget.set",
            "user:alice",
            {"caps": {**UNCAPPED, "total_tokens": 9}, "period": "day", "username": "alice"},
        ),
    ]
    assert isinstance(got[0][4], Budget) and got[0][4].run_id == run.pk
    assert got[1][4].user_id == alice.pk and got[1][4].period == "day"
    recorded = Event.objects.filter(kind="budget.set").order_by("pk")
    assert [(e.object_type, e.actor, e.user_id, e.created_by_id) for e in recorded] == [
        ("budget", "boss", boss.pk, alice.pk),
        ("budget", "boss", boss.pk, alice.pk),
    ]
    assert Event.objects.count() == 2, "an add, taken or refused, records no event"


# REST


def test_rest_reads_and_sets_a_run_budget(api, api_for, boss):
    api.post("/api/runs/", {"run_id": "r"}, format="json")
    api.post("/api/runs/r/usage/", {"input_tokens": 30}, format="json")
    setter = api_for(boss)
    put = setter.put("/api/runs/r/budget/", {"total_tokens": 100, "requests": 5}, format="json")
    assert put.status_code == 200, put.json()
    expected = {
        "caps": {**UNCAPPED, "requests": 5, "total_tokens": 100},
        "used": {"requests": 1, "input_tokens": 30, "output_tokens": 0, "total_tokens": 30},
        "remaining": {**UNCAPPED, "requests": 4, "total_tokens": 70},
    }
    assert put.json() == expected
    assert api.get("/api/runs/r/budget/").json() == expected
    removed = setter.put("/api/runs/r/budget/", {"requests": None}, format="json").json()
    assert removed["caps"] == {**UNCAPPED, "total_tokens": 100} and removed["remaining"] == {
        **UNCAPPED,
        "total_tokens": 70,
    }


def test_rest_refuses_an_add_past_the_cap_with_409_naming_budget_and_counter(api, api_for, boss):
    api.post("/api/runs/", {"run_id": "r"}, format="json")
    api_for(boss).put("/api/users/alice/budget/", {"output_tokens": 10}, format="json")
    assert api.post("/api/runs/r/usage/", {"output_tokens": 10}, format="json").status_code == 200
    refused = api.post("/api/runs/r/usage/", {"output_tokens": 1}, format="json")
    assert refused.status_code == 409
    assert refused.json() == {
        "detail": "Adding 1 output_tokens would exceed the user budget's cap of 10 (10 used);"
        " nothing was added.",
        "code": "budget_exceeded",
        "budget": "user",
        "counter": "output_tokens",
    }
    assert api.get("/api/runs/r/").json()["usage"]["output_tokens"] == 10


def test_rest_reads_and_sets_a_user_budget(api, api_for, boss):
    setter = api_for(boss)
    put = setter.put("/api/users/alice/budget/", {"requests": 3, "period": "day"}, format="json")
    assert put.status_code == 200, put.json()
    body = put.json()
    assert body["caps"] == {**UNCAPPED, "requests": 3} and body["period"] == "day"
    assert body["used"] == NOTHING and body["remaining"] == {**UNCAPPED, "requests": 3}
    resets = dt.datetime.fromisoformat(body["resets_at"].replace("Z", "+00:00"))
    assert resets == utc_day_start() + dt.timedelta(days=1)
    assert api.get("/api/users/alice/budget/").json() == body
    none = setter.put("/api/users/alice/budget/", {"period": None}, format="json").json()
    assert none["period"] is None and none["resets_at"] is None and none["caps"] == body["caps"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"requests": -1}, "requests"),
        ({"requests": 2**63}, "requests"),
        ({"requests": "1"}, "requests"),
        ({"requests": 1.5}, "requests"),
        ({"requests": True}, "requests"),
        ({"cached_tokens": 1}, "cached_tokens"),
        ({"used": {"requests": 0}}, "used"),
        ({"period": "week"}, "period"),
        ({"period": ""}, "period"),
        ({"period": 1}, "period"),
    ],
)
def test_rest_bad_bodies_are_400_and_write_nothing(api, api_for, boss, body, field):
    api.post("/api/runs/", {"run_id": "r"}, format="json")
    setter = api_for(boss)
    before = row_counts()
    user = setter.put("/api/users/alice/budget/", body, format="json")
    assert (user.status_code, user.json()["code"], user.json()["field"]) == (400, "invalid", field)
    if field != "period":  # a run's budget has no period: that is an unknown field too
        run = setter.put("/api/runs/r/budget/", body, format="json")
        assert (run.status_code, run.json()["field"]) == (400, field)
    assert setter.put("/api/runs/r/budget/", {"period": "day"}, format="json").status_code == 400
    assert row_counts() == before


def test_rest_unknown_user_or_run_is_404_for_a_budget_setter(api_for, boss):
    setter = api_for(boss)
    for method in ("get", "put"):
        missing = getattr(setter, method)("/api/users/nobody/budget/", {}, format="json")
        assert (missing.status_code, missing.json()["code"]) == (404, "user_not_found")
        run = getattr(setter, method)("/api/runs/nope/budget/", {}, format="json")
        assert (run.status_code, run.json()["code"]) == (404, "run_not_found")
    bad = setter.get("/api/users/a%00b/budget/")
    assert (bad.status_code, bad.json()["field"]) == (400, "username")


# The admin


@pytest.fixture
def staff(make_user):
    return make_user(
        "staff",
        "agentstate.change_budget",
        "agentstate.view_run",
        "auth.view_user",
        "auth.change_user",
        is_staff=True,
    )


def admin_client(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def inline_form(prefix: str, parent: str, pk: int, **values) -> dict:
    data = {
        f"{prefix}-TOTAL_FORMS": "1",
        f"{prefix}-INITIAL_FORMS": "0",
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1",
        f"{prefix}-0-id": "",
        f"{prefix}-0-{parent}": str(pk),
    }
    data.update({f"{prefix}-0-{name}": value for name, value in values.items()})
    return data


def test_the_run_page_edits_its_budget_through_the_service(staff, alice):
    run = runs.create_run("r", user=alice)
    runs.add_usage(run, input_tokens=40)
    browser = admin_client(staff)
    url = f"/admin/agentstate/run/{run.pk}/change/"
    page = browser.get(url)
    assert page.status_code == 200 and 'name="budget-0-max_total_tokens"' in page.content.decode()
    data = inline_form("budget", "run", run.pk, max_total_tokens="100", max_requests="")
    for prefix in ("approval_records", "approval_requests"):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    saved = browser.post(url, data)
    assert saved.status_code == 302, saved.content.decode()[-2000:]
    assert budgets.run_budget(run).caps == {**UNCAPPED, "total_tokens": 100}
    event = Event.objects.get(kind="budget.set")
    assert (event.object_id, event.actor, event.user_id) == ("run:r", "staff", staff.pk)
    assert usage_of(run)["input_tokens"] == 40, "the run's own row was not written"
    shown = browser.get(url).content.decode()
    assert "60" in shown and "no cap" in shown  # what remains, read-only


def test_the_run_page_is_read_only_without_change_budget(make_user, alice):
    viewer = make_user("viewer", "agentstate.view_run", is_staff=True)
    run = runs.create_run("r", user=alice)
    budgets.set_run_budget(run, {"requests": 7})
    browser = admin_client(viewer)
    url = f"/admin/agentstate/run/{run.pk}/change/"
    page = browser.get(url).content.decode()
    assert 'name="budget-0-max_requests"' not in page and "Budget" in page
    refused = browser.post(url, inline_form("budget", "run", run.pk, max_requests="99"))
    assert refused.status_code == 403
    assert budgets.run_budget(run).caps["requests"] == 7


def test_the_user_page_edits_the_users_budget_through_the_service(staff, alice):
    assert UserBudgetInline in admin.site.get_model_admin(get_user_model()).inlines
    runs.add_usage(runs.create_run("r", user=alice), requests=2)
    browser = admin_client(staff)
    url = f"/admin/auth/user/{alice.pk}/change/"
    page = browser.get(url)
    assert 'name="agentstate_budget-0-period"' in page.content.decode()
    form = page.context["adminform"].form
    data = {
        name: value
        for name, value in form.initial.items()
        if name in form.fields and value is not None and name not in ("groups", "user_permissions")
    }
    data.update(
        {
            "date_joined_0": "2024-01-01",
            "date_joined_1": "00:00:00",
            "last_login_0": "",
            "last_login_1": "",
        }
    )
    data.update(
        inline_form(
            "agentstate_budget",
            "user",
            alice.pk,
            period="day",
            max_requests="5",
            max_total_tokens="",
        )
    )
    saved = browser.post(url, data)
    assert saved.status_code == 302, saved.context["adminform"].form.errors if saved.context else 0
    state = budgets.user_budget(alice)
    assert (state.period, state.caps, state.used) == ("day", {**UNCAPPED, "requests": 5}, NOTHING)
    assert Event.objects.get(kind="budget.set").object_id == "user:alice"


def test_the_user_inline_can_be_turned_off(settings):
    site = admin.AdminSite(name="other")
    site.register(get_user_model(), admin.ModelAdmin)
    settings.AGENTSTATE = {"USER_BUDGET_INLINE": False}
    assert add_user_budget_inline(site) is False
    assert UserBudgetInline not in site.get_model_admin(get_user_model()).inlines
    settings.AGENTSTATE = {}
    assert add_user_budget_inline(site) is True and add_user_budget_inline(site) is True
    assert list(site.get_model_admin(get_user_model()).inlines) == [UserBudgetInline]
    assert add_user_budget_inline(admin.AdminSite(name="empty")) is False
