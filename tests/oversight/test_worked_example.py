"""The worked example of docs/oversight.md: a payments tool that two members of a
group must approve, that rejects itself after an hour and reminds at 45 minutes."""

from datetime import timedelta

import pytest

from agentstate.exceptions import AlreadyVoted, ApprovalRequestExpired, SelfApproval
from agentstate.models import ApprovalRequest, Event
from agentstate.services import approvals, oversight, runs
from agentstate.services.sweep import sweep

from .conftest import shift

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def payments(payments_team, alice, make_user):
    alice.groups.add(payments_team)  # even a member may not approve her own run's calls
    admin_user = make_user("admin", "agentstate.change_approvalrule")
    return oversight.create_rule(
        "send_payment",
        approvals_required=2,
        reviewers="payments-reviewers",
        deadline=3600,
        on_deadline="reject",
        remind_before=900,
        by=admin_user,
    )


def test_two_reviewers_approve_and_the_call_runs_once(payments, alice, reviewer):
    carol, dave = reviewer("carol"), reviewer("dave")
    run = runs.create_run("invoice-42", user=alice)
    call = {"to": "ACME", "eur": 900}
    request = approvals.request_approval(run, "send_payment", "call-1", call)
    remind = (request.deadline - request.remind_at).total_seconds()
    assert remind == 900 and request.on_deadline == "reject"
    with pytest.raises(SelfApproval):
        approvals.decide(request, "approve", by=alice)
    assert approvals.decide(request, "approve", by=carol).status == "pending"
    with pytest.raises(AlreadyVoted):
        approvals.decide(request, "approve", by=carol)
    assert approvals.decide(request, "approve", by=dave).status == "approved"
    oversight.consume(run, "send_payment", "call-1", call)
    assert runs.is_tool_approved(run, "send_payment", "call-1", {**call, "eur": 9000}) is False


def test_nobody_answers_a_reminder_then_a_rejection(payments, alice, reviewer):
    run = runs.create_run("invoice-43", user=alice)
    request = approvals.request_approval(run, "send_payment", "call-1", {"eur": 1}, by=alice)
    shift(request, remind_at=-timedelta(seconds=1), deadline=timedelta(minutes=15))
    sweep()
    shift(request, deadline=-timedelta(seconds=1))
    sweep()
    kinds = list(
        Event.objects.filter(object_id=str(request.pk), object_type="approvalrequest")
        .order_by("pk")
        .values_list("kind", "actor")
    )
    assert kinds == [
        ("approval.requested", "alice"),
        ("approval.expiring", "sweeper"),
        ("approval.decided", f"rule:{payments.pk}"),
    ]
    assert ApprovalRequest.objects.get(pk=request.pk).status == "rejected"
    with pytest.raises(ApprovalRequestExpired):
        approvals.decide(request, "approve", by=reviewer("carol"))
