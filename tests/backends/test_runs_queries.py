"""On PostgreSQL every operation on runs, usage, approvals and the review queue is
one round trip, through the Python API and over REST.

In autocommit (``transaction=True``), so that no savepoint around the call is
counted: what is counted is what a request pays.
"""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentstate.exceptions import (
    AlreadyDecided,
    AlreadyRevoked,
    BudgetExceeded,
    PolicyNotFound,
    RunExists,
    RunNotFound,
    UnknownOwner,
    UsageOverflow,
    UserNotFound,
)
from agentstate.models import ApprovalRequest, Run
from agentstate.services import approvals, budgets, runs

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]


@pytest.fixture
def run(alice) -> Run:
    made = runs.create_run("run-1", {"ticket": 1}, user=alice)
    runs.approve(made, "mail", "c0", by=alice)
    return made


@pytest.fixture
def reviewer(make_user):
    return make_user("reviewer", "agentstate.decide_approvalrequest")


def one_query(operation, *args, **kwargs):
    with CaptureQueriesContext(connection) as queries:
        result = operation(*args, **kwargs)
    assert len(queries) == 1, [q["sql"] for q in queries]
    return result


def test_each_python_operation_is_one_call(run, alice, reviewer):
    one_query(runs.create_run, "run-2", {"x": 1}, user=alice)
    assert one_query(runs.get_run, "run-1").approvals == runs.records("run-1")
    assert one_query(runs.to_json, run)["context"] == {"ticket": 1}
    assert one_query(runs.update_run, run, {"ticket": 2}).context == {"ticket": 2}
    assert one_query(runs.add_usage, run, input_tokens=3)["total_tokens"] == 3
    assert one_query(runs.records, run) == {"mail": {"approved": ["c0"], "rejected": []}}
    assert one_query(runs.is_tool_approved, run, "mail", "c0") is True
    one_query(runs.approve, run, "mail", "c1", by=alice)
    one_query(runs.reject, run, "mail", "c2", always=True, by=alice)
    one_query(runs.rebuild_approvals, run, {"mail": {"approved": ["c1"]}}, by=alice)
    request, created = one_query(approvals.ensure_request, run, "mail", "c3", {"to": "bob"})
    assert created and request.current_status == "pending"
    assert one_query(approvals.ensure_request, run, "mail", "c3")[1] is False
    decided = one_query(approvals.decide, request.pk, "approve", by=reviewer)
    assert (decided.status, decided.run.run_id, decided.decided_by) == (
        "approved",
        "run-1",
        reviewer,
    )
    edited = approvals.request_approval(run, "mail", "c4", {"to": "bob"})
    decided = one_query(
        approvals.decide, edited.pk, "approve", by=reviewer, arguments={"to": "carol"}
    )
    assert decided.approved_arguments == {"to": "carol"}


def test_each_policy_operation_is_one_call(run, alice, reviewer):
    policy = one_query(
        approvals.create_policy,
        "mail",
        "approve",
        user="alice",
        arguments={"to": "bob"},
        by=reviewer,
    )
    assert (policy.user_name, policy.created_by_name) == ("alice", "reviewer")
    one_query(approvals.create_policy, "shell", "reject", user=alice, expires_at=timedelta(days=1))
    filed = one_query(approvals.request_approval, run, "mail", "p1", {"to": "bob", "x": 1})
    assert (filed.status, filed.policy_id) == ("approved", policy.pk)
    assert one_query(runs.is_tool_approved, run, "mail", "p2", {"to": "bob"}) is True
    assert one_query(runs.is_tool_approved, run, "shell", "p3") is False
    revoked = one_query(approvals.revoke_policy, policy.pk, by=reviewer)
    assert revoked.revoked_at is not None and revoked.user_name == "alice"
    with pytest.raises(AlreadyRevoked):
        one_query(approvals.revoke_policy, policy.pk, by=reviewer)
    with pytest.raises(PolicyNotFound):
        one_query(approvals.revoke_policy, policy.pk + 100, by=reviewer)
    with pytest.raises(UnknownOwner):
        one_query(approvals.create_policy, "mail", "approve", user="nobody")


def test_refusals_are_one_call_too(run, reviewer):
    with pytest.raises(RunExists):
        one_query(runs.create_run, "run-1")
    with pytest.raises(RunNotFound):
        one_query(runs.approve, "nope", "mail", "c1")
    Run.objects.filter(pk=run.pk).update(requests=2**63 - 1)
    with pytest.raises(UsageOverflow):
        one_query(runs.add_usage, run)
    request = approvals.request_approval(run, "mail", "c1")
    approvals.decide(request, "approve")  # no decider to name
    with pytest.raises(AlreadyDecided):
        one_query(approvals.decide, request.pk, "reject", by=reviewer)


def test_add_usage_under_both_budgets_and_every_budget_operation_is_one_call(run, alice):
    budgets.set_user_budget(alice, {"total_tokens": 100}, period="day")
    other = runs.create_run("run-2", user=alice)
    assert one_query(budgets.set_run_budget, run, {"total_tokens": 50}).caps["total_tokens"] == 50
    assert one_query(runs.add_usage, run, input_tokens=30)["total_tokens"] == 30
    assert one_query(runs.add_usage, other, input_tokens=60)["total_tokens"] == 60
    assert one_query(budgets.run_budget, run).remaining["total_tokens"] == 20
    assert one_query(budgets.user_budget, "alice").used["total_tokens"] == 90
    state = one_query(budgets.set_user_budget, "alice", {"requests": 9}, period="month")
    assert (state.period, state.used["total_tokens"]) == ("month", 0)
    with pytest.raises(BudgetExceeded):
        one_query(runs.add_usage, run, input_tokens=21)  # the run's: 30 + 21 > 50
    budgets.set_user_budget("alice", {"total_tokens": 10})
    with pytest.raises(BudgetExceeded):
        one_query(runs.add_usage, other, input_tokens=11)  # the user's: 0 + 11 > 10
    with pytest.raises(UserNotFound):
        one_query(budgets.user_budget, "nobody")
    with pytest.raises(RunNotFound):
        one_query(budgets.set_run_budget, "nope", {"requests": 1})


@pytest.fixture
def owner_api(api_for, alice):
    """alice's client, her permissions read once (as a token's user brings them)."""
    alice.has_perm("agentstate.view_run")
    return api_for(alice)


@pytest.mark.parametrize(
    "method,path,body,expected",
    [
        ("get", "/api/runs/run-1/", None, 200),
        ("patch", "/api/runs/run-1/", {"context": [1]}, 200),
        ("patch", "/api/runs/run-1/", {}, 200),
        ("post", "/api/runs/run-1/usage/", {"input_tokens": 2}, 200),
        ("get", "/api/runs/run-1/approvals/", None, 200),
        ("get", "/api/runs/run-1/approvals/?tool_name=mail&call_id=c0", None, 200),
        ("post", "/api/runs/run-1/approvals/approve/", {"tool_name": "m", "call_id": "c"}, 200),
        ("post", "/api/runs/run-1/approvals/reject/", {"tool_name": "m", "call_id": "c"}, 200),
        ("put", "/api/runs/run-1/approvals/", {"m": {"approved": True}}, 200),
        ("post", "/api/runs/run-1/approval-requests/", {"tool_name": "m", "call_id": "c"}, 201),
        ("post", "/api/runs/", {"run_id": "run-2"}, 201),
        ("get", "/api/runs/nope/", None, 404),
        ("get", "/api/runs/run-1/budget/", None, 200),
        ("get", "/api/users/alice/budget/", None, 200),  # one's own
    ],
)
def test_each_run_endpoint_is_one_query(run, owner_api, method, path, body, expected):
    kwargs = {} if body is None else {"data": body, "format": "json"}
    with CaptureQueriesContext(connection) as queries:
        response = getattr(owner_api, method)(path, **kwargs)
    assert response.status_code == expected, response.content
    assert len(queries) == 1, [q["sql"] for q in queries]


@pytest.mark.parametrize(
    "method,path,body,expected",
    [
        ("get", "/api/runs/run-1/budget/", None, 200),
        ("put", "/api/runs/run-1/budget/", {"requests": 9}, 200),
        ("get", "/api/users/alice/budget/", None, 200),
        ("put", "/api/users/alice/budget/", {"requests": 9, "period": "day"}, 200),
        ("get", "/api/users/nobody/budget/", None, 404),
        ("post", "/api/runs/run-1/usage/", {"input_tokens": 2}, 200),
        ("post", "/api/runs/run-1/usage/", {"input_tokens": 20}, 409),
    ],
)
def test_each_budget_endpoint_is_one_query(run, api_for, make_user, method, path, body, expected):
    setter = make_user("setter", "agentstate.change_budget", "agentstate.change_run")
    budgets.set_run_budget(run, {"total_tokens": 10})
    budgets.set_user_budget("alice", {"total_tokens": 10})
    setter.has_perm("agentstate.change_budget")  # its permissions read once, as a token's user
    kwargs = {} if body is None else {"data": body, "format": "json"}
    with CaptureQueriesContext(connection) as queries:
        response = getattr(api_for(setter), method)(path, **kwargs)
    assert response.status_code == expected, response.content
    assert len(queries) == 1, [q["sql"] for q in queries]


def test_filing_again_and_deciding_over_rest_are_one_query(run, owner_api, api_for, reviewer):
    body = {"tool_name": "mail", "call_id": "c1"}
    filed = owner_api.post("/api/runs/run-1/approval-requests/", body, format="json").json()
    with CaptureQueriesContext(connection) as queries:
        again = owner_api.post("/api/runs/run-1/approval-requests/", body, format="json")
    assert again.status_code == 200 and again.json() == filed and len(queries) == 1
    reviewing = api_for(reviewer)
    reviewer.has_perm("agentstate.decide_approvalrequest")
    with CaptureQueriesContext(connection) as queries:
        decided = reviewing.post(
            f"/api/approval-requests/{filed['id']}/decide/", {"decision": "reject"}, format="json"
        )
    assert decided.status_code == 200 and len(queries) == 1, [q["sql"] for q in queries]
    stored = approvals.with_current_status(ApprovalRequest.objects.select_related("run"))
    assert decided.json()["decided_at"] is not None
    assert (decided.json()["status"], decided.json()["decided_by"]) == ("rejected", "reviewer")
    assert stored.get().current_status == "rejected"
