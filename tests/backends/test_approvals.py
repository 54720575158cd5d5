"""The review queue through the Python API: request_approval and decide (docs/concepts.md)."""

from datetime import timedelta

import pytest
from django.db.models.functions import Now

from agentstate.exceptions import (
    AlreadyDecided,
    ApprovalRequestExpired,
    ApprovalRequestNotFound,
    BadInput,
    RunNotFound,
)
from agentstate.models import ApprovalRequest, Event, Run
from agentstate.services import approvals, runs
from agentstate.services.sweep import sweep
from agentstate.types import Reach

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(alice) -> Run:
    return runs.create_run("run-1", {"ticket": 42}, user=alice)


@pytest.fixture
def reviewer(make_user):
    return make_user("reviewer", "agentstate.decide_approvalrequest")


def age(request: ApprovalRequest, by: timedelta) -> None:
    ApprovalRequest.objects.filter(pk=request.pk).update(created_at=Now() - by)


def test_request_approval_is_idempotent_per_run_and_call(run, alice):
    first, created = approvals.ensure_request(run, "mail", "c1", {"to": "bob"}, by=alice)
    assert created and first.status == "pending" and first.created_by == alice
    assert first.arguments == {"to": "bob"} and first.created_at is not None
    again, created = approvals.ensure_request(run, "mail", "c1", {"to": "eve"})
    assert not created and again.pk == first.pk and again.arguments == {"to": "bob"}
    assert approvals.request_approval(run, "mail", "c1").pk == first.pk
    other_run = runs.create_run("run-2")
    assert approvals.request_approval(other_run, "mail", "c1").pk != first.pk
    assert Event.objects.filter(kind="approval.requested").count() == 2


@pytest.mark.parametrize(
    "records,status,always",
    [
        ({"mail": {"approved": ["c1"], "rejected": []}}, "approved", False),
        ({"mail": {"approved": [], "rejected": ["c1"]}}, "rejected", False),
        ({"mail": {"approved": True, "rejected": []}}, "approved", True),
        ({"mail": {"approved": False, "rejected": True}}, "rejected", True),
        ({"mail": {"approved": ["c2"], "rejected": []}}, "pending", False),
    ],
)
def test_a_call_the_records_decide_is_filed_already_decided(run, records, status, always):
    runs.rebuild_approvals(run, records)
    request = approvals.request_approval(run, "mail", "c1")
    assert (request.status, request.always, request.decided_by) == (status, always, None)
    assert (request.decided_at is not None) == (status != "pending")


def test_decide_approves_once_and_writes_the_record(run, reviewer):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    decided = approvals.decide(request, "approve", by=reviewer, reason="known recipient")
    assert (decided.status, decided.decided_by, decided.reason, decided.always) == (
        "approved",
        reviewer,
        "known recipient",
        False,
    )
    assert decided.decided_at is not None
    assert runs.records(run) == {"mail": {"approved": ["c1"], "rejected": []}}
    assert runs.is_tool_approved(run, "mail", "c1") is True
    event = Event.objects.get(kind="approval.decided")
    assert (event.object_id, event.actor, event.details) == (
        str(request.pk),
        "reviewer",
        {
            "run_id": "run-1",
            "tool_name": "mail",
            "call_id": "c1",
            "decision": "approve",
            "always": False,
            "reason": "known recipient",
        },
    )
    events_before = Event.objects.count()
    with pytest.raises(AlreadyDecided, match="approved by reviewer"):
        approvals.decide(request.pk, "reject", by=reviewer)
    assert ApprovalRequest.objects.get(pk=request.pk).status == "approved"
    assert Event.objects.count() == events_before
    assert runs.is_tool_approved(run, "mail", "c1") is True


def test_decide_always_reject_decides_every_call_of_the_tool(run, reviewer):
    runs.approve(run, "mail", "c0")
    request = approvals.request_approval(run, "mail", "c1")
    approvals.decide(request, "reject", always=True, by=reviewer)
    assert runs.records(run) == {"mail": {"approved": False, "rejected": True}}
    later = approvals.request_approval(run, "mail", "c2")
    assert (later.status, later.always) == ("rejected", True)


def test_deciding_a_pending_request_past_the_ttl_is_refused_before_the_sweep(
    run, reviewer, settings
):
    settings.AGENTSTATE = {"APPROVAL_TTL": timedelta(hours=1)}
    request = approvals.request_approval(run, "mail", "c1")
    age(request, timedelta(minutes=59))
    approvals.decide(request, "approve", by=reviewer)  # still within the TTL

    stale = approvals.request_approval(run, "mail", "c2")
    age(stale, timedelta(hours=1, seconds=1))
    events_before = Event.objects.count()
    with pytest.raises(ApprovalRequestExpired) as caught:
        approvals.decide(stale, "approve", by=reviewer)
    assert (caught.value.status, caught.value.code) == (410, "expired")
    assert Event.objects.count() == events_before
    assert ApprovalRequest.objects.get(pk=stale.pk).status == "pending"
    assert runs.is_tool_approved(run, "mail", "c2") is None
    assert sweep().expired_approval_requests == 1
    with pytest.raises(ApprovalRequestExpired):
        approvals.decide(stale, "reject", by=reviewer)


def test_an_old_decided_request_is_already_decided_not_expired(run, reviewer):
    request = approvals.request_approval(run, "mail", "c1")
    approvals.decide(request, "approve", by=reviewer)
    age(request, timedelta(days=30))
    with pytest.raises(AlreadyDecided):
        approvals.decide(request, "approve", by=reviewer)


def test_current_status_and_filters_read_past_ttl_requests_as_expired(run):
    fresh = approvals.request_approval(run, "mail", "c1")
    stale = approvals.request_approval(run, "mail", "c2")
    age(stale, timedelta(days=2))
    rows = approvals.with_current_status(ApprovalRequest.objects.order_by("pk"))
    assert [r.current_status for r in rows] == ["pending", "expired"]
    assert list(ApprovalRequest.objects.filter(approvals.in_status("pending"))) == [fresh]
    assert list(ApprovalRequest.objects.filter(approvals.in_status("expired"))) == [stale]


def test_approval_request_reads_one_request_as_a_listing_shows_it(run, alice, bob, reviewer):
    fresh = approvals.request_approval(run, "mail", "c1", {"to": "bob"}, by=alice)
    stale = approvals.request_approval(run, "mail", "c2", by=alice)
    decided = approvals.request_approval(run, "mail", "c3", by=alice)
    approvals.decide(decided, "reject", by=reviewer, reason="no")
    age(stale, timedelta(days=2))
    listed = approvals.with_current_status(ApprovalRequest.objects.all())
    for filed in (fresh, stale, decided):
        read = approvals.approval_request(filed.pk)
        shown = listed.select_related("run", "decided_by").get(pk=filed.pk)
        assert read is not None and read == shown
        assert read.current_status == shown.current_status
        assert read.run.run_id == "run-1" and read.decided_by == shown.decided_by
        assert read.arguments == shown.arguments and read.created_at == shown.created_at
        assert read.decided_at == shown.decided_at and read.reason == shown.reason
    assert approvals.approval_request(stale.pk).current_status == "expired"
    assert approvals.approval_request(decided.pk).decided_by == reviewer
    # Within a reach: the requests its user filed.
    assert approvals.approval_request(fresh.pk, reach=Reach(alice.pk, "alice")) == fresh
    assert approvals.approval_request(fresh.pk, reach=Reach(bob.pk, "bob")) is None
    for missing in (0, -1, decided.pk + 1000, 2**63):
        assert approvals.approval_request(missing) is None


@pytest.mark.parametrize(
    "decision,options,field",
    [
        ("maybe", {}, "decision"),
        ("approve", {"always": 1}, "always"),
        ("reject", {"reason": 5}, "reason"),
        ("reject", {"reason": "a\x00b"}, "reason"),
    ],
)
def test_decide_refuses_bad_input_and_changes_nothing(run, reviewer, decision, options, field):
    request = approvals.request_approval(run, "mail", "c1")
    with pytest.raises(BadInput) as caught:
        approvals.decide(request, decision, by=reviewer, **options)
    assert caught.value.field == field
    assert ApprovalRequest.objects.get(pk=request.pk).status == "pending"
    assert runs.records(run) == {}


def test_decide_of_a_missing_request_is_not_found(reviewer):
    with pytest.raises(ApprovalRequestNotFound):
        approvals.decide(10**6, "approve", by=reviewer)


@pytest.mark.parametrize(
    "args,field",
    [
        (("", "c1"), "tool_name"),
        (("mail", "x" * 256), "call_id"),
        (("mail", "c1", {"a": float("nan")}), "arguments"),
    ],
)
def test_request_approval_refuses_bad_input(run, args, field):
    with pytest.raises(BadInput) as caught:
        approvals.request_approval(run, *args)
    assert caught.value.field == field
    assert not ApprovalRequest.objects.exists()


def test_decide_answers_the_request_as_decided(run, reviewer):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    decided = approvals.decide(request.pk, "reject", always=True, by=reviewer, reason="no")
    stored = approvals.with_current_status(ApprovalRequest.objects.all()).get(pk=request.pk)
    assert (decided.run.run_id, decided.current_status, decided.arguments) == (
        "run-1",
        "rejected",
        {"to": "bob"},
    )
    for field in ("status", "always", "decided_by_id", "decided_at", "reason", "created_at"):
        assert getattr(decided, field) == getattr(stored, field), field


def test_an_undecided_request_names_no_decider_when_refused(run):
    request = approvals.request_approval(run, "mail", "c1")
    approvals.decide(request, "approve")
    with pytest.raises(AlreadyDecided) as caught:
        approvals.decide(request, "approve")
    assert caught.value.detail == "The approval request was already approved."


def test_filing_for_a_run_outside_the_reach_writes_nothing(run, bob):
    with pytest.raises(RunNotFound):
        approvals.request_approval(run, "mail", "c1", reach=Reach(bob.pk, "bob"))
    assert not ApprovalRequest.objects.exists() and not Event.objects.exists()
    mine = approvals.ensure_request(run, "mail", "c1", reach=Reach(run.created_by_id, "alice"))
    assert mine[1] and mine[0].run.run_id == "run-1"


@pytest.mark.parametrize("pk", [0, -1, 2**63, 10**30])
def test_a_request_id_outside_the_key_is_not_found(reviewer, pk):
    with pytest.raises(ApprovalRequestNotFound):
        approvals.decide(pk, "approve", by=reviewer)
