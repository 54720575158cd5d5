"""Races, with real threads and their own connections (``concurrently``): the
deciding vote, the deadline against a decision, and using an approval."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from agentstate.exceptions import (
    AgentStateError,
    AlreadyConsumed,
    AlreadyDecided,
    ApprovalRequestExpired,
)
from agentstate.models import ApprovalRequest, Event, Run, Vote
from agentstate.services import approvals, oversight, runs
from agentstate.services.sweep import sweep

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_deciding_votes_at_once_make_one_decision(concurrently, alice, reviewer):
    oversight.create_rule("pay", approvals_required=2, reviewers="payments-reviewers")
    first, *racers = [reviewer(f"r{i}") for i in range(3)]
    run = runs.create_run("vote-race", user=alice)
    for round_ in range(5):
        request = approvals.request_approval(run, "pay", f"c{round_}", {"n": round_})
        approvals.decide(request, "approve", by=first)

        def vote(i: int, pk: int = request.pk):
            return approvals.decide(pk, "approve", by=racers[i])

        results = concurrently(2, vote)
        winners = [r for r in results if isinstance(r, ApprovalRequest)]
        late = [r for r in results if isinstance(r, AlreadyDecided)]
        assert len(winners) == 1 and len(late) == 1, results
        assert winners[0].status == "approved"
        assert Vote.objects.filter(request_id=request.pk).count() == 2
        decided = Event.objects.filter(kind="approval.decided", object_id=str(request.pk))
        assert decided.count() == 1


def test_a_decision_racing_the_deadline_is_one_or_the_other(concurrently, alice, reviewer):
    rule = oversight.create_rule("pay", deadline=3600, on_deadline="reject")
    carol = reviewer("carol")
    run = runs.create_run("deadline-race", user=alice)
    for round_ in range(4):
        request = approvals.request_approval(run, "pay", f"c{round_}")
        due = timezone.now() + timedelta(milliseconds=300)
        ApprovalRequest.objects.filter(pk=request.pk).update(deadline=due)

        def act(i: int, pk: int = request.pk, due=due):
            while timezone.now() < due - timedelta(milliseconds=20):
                time.sleep(0.005)
            if i == 0:
                try:
                    return approvals.decide(pk, "approve", by=carol)
                except ApprovalRequestExpired as error:
                    return error
            for _ in range(20):
                sweep()
                time.sleep(0.02)
            return None

        decided, _ = concurrently(2, act)
        stored = ApprovalRequest.objects.get(pk=request.pk)
        events = Event.objects.filter(kind="approval.decided", object_id=str(request.pk))
        assert events.count() == 1
        if isinstance(decided, ApprovalRequest):
            assert stored.status == "approved" and events.get().actor == "carol"
        else:
            assert isinstance(decided, ApprovalRequestExpired), decided
            assert stored.status == "rejected" and events.get().actor == f"rule:{rule.pk}"


def _decided_behind_a_lock(concurrently, run, until, decide, then=None):
    """What ``decide()`` gives (or raises) when sent while another transaction holds
    the run's row, as the sweep does, from well before ``until`` to just after it,
    and runs ``then()`` there before it commits."""
    locked = threading.Event()

    def act(i: int):
        if i == 0:
            with transaction.atomic():
                Run.objects.select_for_update().get(pk=run.pk)
                locked.set()
                while timezone.now() < until + timedelta(milliseconds=50):
                    time.sleep(0.01)
                if then is not None:
                    then()
            return None
        locked.wait()
        time.sleep(0.1)  # then waits for the run's row, from well before ``until``
        try:
            return decide()
        except AgentStateError as error:
            return error

    return concurrently(2, act)[1]


def test_a_decision_that_waited_for_the_deadline_is_expired(concurrently, alice, reviewer):
    """A decision sent before the deadline that holds the request only after the
    sweep decided it there answers expired, as one sent after it does."""
    oversight.create_rule("pay", deadline=3600, on_deadline="reject")
    carol = reviewer("carol")
    run = runs.create_run("deadline-wait", user=alice)
    request = approvals.request_approval(run, "pay", "c1")
    due = timezone.now() + timedelta(seconds=1)
    ApprovalRequest.objects.filter(pk=request.pk).update(deadline=due)
    decided = _decided_behind_a_lock(
        concurrently, run, due, lambda: approvals.decide(request.pk, "approve", by=carol), sweep
    )
    assert isinstance(decided, ApprovalRequestExpired), decided
    assert ApprovalRequest.objects.get(pk=request.pk).status == "rejected"


def test_a_decision_that_waited_for_the_escalation_is_escalated(
    concurrently, alice, reviewer, leads
):
    """Escalation by the same clock: a lead's decision sent before the request
    escalates, holding it only after, is a decision of its escalation group."""
    oversight.create_rule(
        "pay", reviewers="payments-reviewers", escalate_after=1800, escalate_to=leads
    )
    lead = reviewer("lead", leads)
    run = runs.create_run("escalation-wait", user=alice)
    request = approvals.request_approval(run, "pay", "c1")
    due = timezone.now() + timedelta(seconds=1)
    ApprovalRequest.objects.filter(pk=request.pk).update(escalate_at=due)
    decided = _decided_behind_a_lock(
        concurrently, run, due, lambda: approvals.decide(request.pk, "approve", by=lead)
    )
    assert isinstance(decided, ApprovalRequest) and decided.status == "approved", decided


def test_two_consumers_at_once_use_it_once(concurrently, alice):
    run = runs.create_run("consume-race", user=alice)
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    approvals.decide(request, "approve", by=alice)

    def use(i: int):
        return oversight.consume("consume-race", "mail", "c1", {"to": "bob"})

    results = concurrently(4, use)
    assert sum(isinstance(r, ApprovalRequest) for r in results) == 1
    assert sum(isinstance(r, AlreadyConsumed) for r in results) == 3, results
    assert Event.objects.filter(kind="approval.consumed").count() == 1
