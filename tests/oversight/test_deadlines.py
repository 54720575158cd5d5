"""Deadlines that act: the sweep applies on_deadline once, reminds once, escalates once."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agentstate.backends import backend
from agentstate.exceptions import ApprovalRequestExpired, NotAReviewer
from agentstate.models import ApprovalRequest, Event
from agentstate.services import approvals, oversight, runs
from agentstate.services.sweep import apply_deadlines, sweep

from .conftest import shift

pytestmark = pytest.mark.django_db(transaction=True)
PAST = -timedelta(seconds=1)


def _kinds(request: ApprovalRequest) -> list[tuple[str, str]]:
    return list(
        Event.objects.filter(object_type="approvalrequest", object_id=str(request.pk))
        .order_by("pk")
        .values_list("kind", "actor")
    )


@pytest.mark.parametrize(
    "on_deadline,status,approved", [("reject", "rejected", False), ("approve", "approved", True)]
)
def test_the_sweep_decides_at_the_deadline_once(run, reviewer, on_deadline, status, approved):
    rule = oversight.create_rule("pay", deadline=3600, on_deadline=on_deadline)
    request = approvals.request_approval(run, "pay", "c1", {"amount": 1})
    assert sweep().expired_approval_requests == 0
    shift(request, deadline=PAST)
    assert sweep().expired_approval_requests == 1
    assert sweep().expired_approval_requests == 0
    request.refresh_from_db()
    assert (request.status, request.decided_by_id) == (status, None)
    assert runs.is_tool_approved(run, "pay", "c1") is approved
    decided = Event.objects.get(kind="approval.decided", object_id=str(request.pk))
    assert decided.actor == f"rule:{rule.pk}" and decided.user_id is None
    with pytest.raises(ApprovalRequestExpired):  # whatever the sweep did
        approvals.decide(request, "approve", by=reviewer("carol"))


def test_expire_at_the_deadline(run):
    oversight.create_rule("pay", deadline=60)
    request = approvals.request_approval(run, "pay", "c1")
    shift(request, deadline=PAST)
    # before the sweep the listing already reads expired
    listed = approvals.with_current_status(ApprovalRequest.objects.filter(pk=request.pk)).get()
    assert listed.current_status == "expired"
    sweep()
    request.refresh_from_db()
    assert request.status == "expired"
    assert _kinds(request)[-1][0] == "approval.expired"


def test_a_longer_deadline_outlives_the_ttl(run, settings):
    settings.AGENTSTATE = {"APPROVAL_TTL": timedelta(seconds=1)}
    oversight.create_rule("pay", deadline=3600)
    request = approvals.request_approval(run, "pay", "c1")
    ApprovalRequest.objects.filter(pk=request.pk).update(
        created_at=request.created_at - timedelta(hours=1) + timedelta(minutes=5)
    )
    sweep()
    request.refresh_from_db()
    assert request.status == "pending"


def test_reminder_and_escalation_are_written_once(run, leads, reviewer):
    oversight.create_rule(
        "pay",
        reviewers="payments-reviewers",
        deadline=3600,
        remind_before=900,
        escalate_after=1800,
        escalate_to=leads,
    )
    request = approvals.request_approval(run, "pay", "c1")
    sweep()
    assert [k for k, _ in _kinds(request)] == ["approval.requested"]
    shift(request, remind_at=PAST, escalate_at=PAST)
    sweep()
    sweep()
    assert [k for k, _ in _kinds(request)] == [
        "approval.requested",
        "approval.expiring",
        "approval.escalated",
    ]
    lead = reviewer("lead", leads)
    assert approvals.decide(request, "reject", by=lead).status == "rejected"


def test_deadlines_and_escalation_are_by_the_databases_clock(run, leads, reviewer, monkeypatch):
    """Nodes whose clocks drift apart agree on a request's times: its deadline is
    set, and checked at a decision, by the database's clock, as its escalation is."""
    oversight.create_rule(
        "pay",
        reviewers="payments-reviewers",
        deadline=3600,
        escalate_after=1800,
        escalate_to=leads,
    )
    ahead = timezone.now() + timedelta(days=1)
    monkeypatch.setattr(timezone, "now", lambda: ahead)  # this process's clock a day ahead
    request = approvals.request_approval(run, "pay", "c1")
    # (the portable backend reads the clock with the rule, a statement before the insert)
    assert abs(request.deadline - request.created_at - timedelta(hours=1)) < timedelta(minutes=1)
    assert abs(request.escalate_at - request.created_at - timedelta(minutes=30)) < timedelta(
        minutes=1
    )
    with pytest.raises(NotAReviewer):  # not escalated yet, by the database's clock
        approvals.decide(request, "approve", by=reviewer("lead", leads))
    assert approvals.decide(request, "approve", by=reviewer("rita")).status == "approved"


def test_batches_go_on_from_where_the_last_ended(run):
    """Seven requests in batches of two, four of them past one same deadline and
    three due for their reminder: each request's due steps taken once, none left out
    (a batch that ends inside the four goes on after the last one it took)."""
    oversight.create_rule("pay", deadline=3600, remind_before=900)
    requests = [approvals.request_approval(run, "pay", f"c{i}") for i in range(7)]
    same = timezone.now() - timedelta(seconds=5)
    for i, request in enumerate(requests):
        if i % 2:  # reminded, its deadline an hour away: pending before the next batch's
            shift(request, remind_at=PAST, deadline=timedelta(hours=1, seconds=i))
        else:
            ApprovalRequest.objects.filter(pk=request.pk).update(deadline=same)
    assert apply_deadlines(backend(), 2) == 4
    assert apply_deadlines(backend(), 2) == 0
    kinds = [[kind for kind, _ in _kinds(request)][1:] for request in requests]
    assert kinds == [
        ["approval.expired"] if i % 2 == 0 else ["approval.expiring"] for i in range(7)
    ]
