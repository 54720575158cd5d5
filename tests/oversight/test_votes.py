"""M of N, separation of duties, and the request's REST form under a rule."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model

from agentstate.exceptions import (
    AlreadyDecided,
    AlreadyVoted,
    ApprovalRequestExpired,
    NotAReviewer,
    SelfApproval,
)
from agentstate.models import Event
from agentstate.services import approvals, oversight, runs
from agentstate.types import arguments_digest

from .conftest import shift

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_of_group(payments_team):
    return oversight.create_rule("pay", approvals_required=2, reviewers=payments_team)


def test_two_reviewers_decide_and_one_is_not_enough(run, reviewer, two_of_group):
    carol, dave = reviewer("carol"), reviewer("dave")
    request = approvals.request_approval(run, "pay", "c1", {"amount": 10})
    first = approvals.decide(request, "approve", by=carol, reason="ok")
    assert first.status == "pending"
    assert runs.is_tool_approved(run, "pay", "c1") is None
    with pytest.raises(AlreadyVoted):
        approvals.decide(request, "approve", by=carol)
    second = approvals.decide(request, "approve", by=dave)
    assert (second.status, second.decided_by) == ("approved", dave)
    assert runs.is_tool_approved(run, "pay", "c1") is True
    kinds = list(
        Event.objects.filter(object_type="approvalrequest", object_id=str(request.pk))
        .order_by("pk")
        .values_list("kind", flat=True)
    )
    assert kinds == ["approval.requested", "approval.voted", "approval.voted", "approval.decided"]
    voted = Event.objects.filter(kind="approval.voted").order_by("pk").first()
    assert voted.actor == "carol"
    assert voted.details["arguments_digest"] == arguments_digest({"amount": 10})


def test_one_reject_decides(run, reviewer, two_of_group):
    carol, dave = reviewer("carol"), reviewer("dave")
    request = approvals.request_approval(run, "pay", "c1", {"amount": 10})
    approvals.decide(request, "approve", by=carol)
    rejected = approvals.decide(request, "reject", by=dave, reason="no")
    assert rejected.status == "rejected"
    assert runs.is_tool_approved(run, "pay", "c1") is False


def test_an_edit_restarts_the_count_for_the_edited_arguments(run, reviewer, two_of_group):
    carol, dave, erin = reviewer("carol"), reviewer("dave"), reviewer("erin")
    request = approvals.request_approval(run, "pay", "c1", {"amount": 100})
    approvals.decide(request, "approve", by=carol)
    edited = approvals.decide(request, "approve", by=dave, arguments={"amount": 50})
    assert edited.status == "pending"  # one vote for 100, one for 50
    done = approvals.decide(request, "approve", by=erin, arguments={"amount": 50})
    assert done.status == "approved"
    assert done.approved_arguments == {"amount": 50}
    assert done.arguments_digest == arguments_digest({"amount": 50})
    assert runs.is_tool_approved(run, "pay", "c1", {"amount": 50}) is True
    assert runs.verdict(run, "pay", "c1", {"amount": 100}) == (False, "arguments_changed")


def test_self_approval_is_refused_unless_allowed(run, alice, payments_team):
    alice.groups.add(payments_team)
    rule = oversight.create_rule("pay", reviewers=payments_team)
    request = approvals.request_approval(run, "pay", "c1")
    with pytest.raises(SelfApproval):
        approvals.decide(request, "approve", by=alice)
    oversight.change_rule(rule, allow_self_approval=True)
    later = approvals.request_approval(run, "pay", "c2")
    assert approvals.decide(later, "approve", by=alice).status == "approved"


def test_outside_the_reviewers_is_refused_until_escalation(run, make_user, reviewer, leads):
    lead = reviewer("lead", leads)
    outsider = make_user("outsider", "agentstate.decide_approvalrequest")
    oversight.create_rule(
        "pay", reviewers="payments-reviewers", escalate_after=1800, escalate_to=leads
    )
    request = approvals.request_approval(run, "pay", "c1")
    with pytest.raises(NotAReviewer):
        approvals.decide(request, "approve", by=outsider)
    with pytest.raises(NotAReviewer):
        approvals.decide(request, "approve", by=lead)
    shift(request, escalate_at=-timedelta(seconds=1))
    with pytest.raises(NotAReviewer):
        approvals.decide(request, "approve", by=outsider)
    assert approvals.decide(request, "approve", by=lead).status == "approved"


def test_deciding_after_the_deadline_is_expired(run, reviewer):
    oversight.create_rule("pay", deadline=3600, on_deadline="reject")
    request = approvals.request_approval(run, "pay", "c1")
    shift(request, deadline=-timedelta(seconds=1))
    with pytest.raises(ApprovalRequestExpired):
        approvals.decide(request, "approve", by=reviewer("carol"))


def test_a_decided_request_answers_already_decided(run, reviewer):
    oversight.create_rule("pay")
    request = approvals.request_approval(run, "pay", "c1")
    approvals.decide(request, "approve", by=reviewer("carol"))
    with pytest.raises(AlreadyDecided):
        approvals.decide(request, "approve", by=reviewer("dave"))


def test_rest_form_and_errors(run, api_for, reviewer, two_of_group, alice):
    carol, dave = reviewer("carol"), reviewer("dave")
    filed = api_for(alice).post(
        "/api/runs/run-1/approval-requests/",
        {"tool_name": "pay", "call_id": "c1", "arguments": {"amount": 10, "to": "ü"}},
        format="json",
    )
    assert filed.status_code == 201
    body = filed.json()
    assert body["approvals_required"] == 2 and body["votes"] == []
    assert body["arguments_digest"] == arguments_digest({"amount": 10, "to": "ü"})
    assert body["deadline"] is not None
    decide = f"/api/approval-requests/{body['id']}/decide/"
    first = api_for(carol).post(decide, {"decision": "approve", "reason": "fine"}, format="json")
    assert first.status_code == 200 and first.json()["status"] == "pending"
    [vote] = first.json()["votes"]
    assert vote["by"] == "carol" and vote["decision"] == "approve" and vote["reason"] == "fine"
    assert set(vote) == {"by", "decision", "arguments_digest", "reason", "at"}
    twice = api_for(carol).post(decide, {"decision": "approve"}, format="json")
    assert (twice.status_code, twice.json()["code"]) == (409, "already_voted")
    own = api_for(alice).post(decide, {"decision": "approve"}, format="json")
    assert own.status_code == 403  # alice lacks the permission first
    outsider = api_for(get_user_model().objects.create_user("out"))
    assert outsider.post(decide, {"decision": "approve"}, format="json").status_code == 403
    done = api_for(dave).post(decide, {"decision": "approve"}, format="json")
    assert done.json()["status"] == "approved" and len(done.json()["votes"]) == 2
    listed = api_for(carol).get(f"/api/approval-requests/{body['id']}/").json()
    assert [v["by"] for v in listed["votes"]] == ["carol", "dave"]


def test_rest_not_a_reviewer_and_self_approval(run, api_for, make_user, alice, payments_team):
    oversight.create_rule("pay", reviewers=payments_team)
    outsider = make_user("outsider", "agentstate.decide_approvalrequest")
    request = approvals.request_approval(run, "pay", "c1")
    answer = api_for(outsider).post(
        f"/api/approval-requests/{request.pk}/decide/", {"decision": "approve"}, format="json"
    )
    assert (answer.status_code, answer.json()["code"]) == (403, "not_a_reviewer")
    oversight.create_rule("wire")
    boss = make_user("boss", "agentstate.decide_approvalrequest")
    mine = runs.create_run("run-boss", user=boss)
    wire = approvals.request_approval(mine, "wire", "c1")
    answer = api_for(boss).post(
        f"/api/approval-requests/{wire.pk}/decide/", {"decision": "approve"}, format="json"
    )
    assert (answer.status_code, answer.json()["code"]) == (403, "self_approval")
