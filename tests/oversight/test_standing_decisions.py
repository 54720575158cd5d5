"""Standing decisions under a rule: a policy, or an approval written into a run's
records, takes the rule's right (docs/oversight.md, "Standing decisions").

Without it, the run's creator could approve its own calls of a ruled tool through
its records, and anyone holding ``decide_approvalrequest`` could make an approve
policy: either then decided the tool's requests as they were filed, past the
rule's reviewers and its M of N.
"""

from datetime import timedelta

import pytest

from agentstate.exceptions import NotAReviewer, SelfApproval, VotesRequired
from agentstate.models import ApprovalPolicy, Event
from agentstate.services import approvals, oversight, runs

from .conftest import shift

pytestmark = pytest.mark.django_db(transaction=True)


def events_of(kind: str) -> int:
    return Event.objects.filter(kind=kind).count()


def test_the_runs_creator_may_not_approve_a_ruled_tool_in_its_records(run, alice):
    oversight.create_rule("pay")
    with pytest.raises(SelfApproval):
        runs.approve(run, "pay", "c1", by=alice)
    with pytest.raises(SelfApproval):
        runs.approve(run, "pay", "c1", always=True, by=alice)
    assert runs.records(run) == {}
    assert events_of("approvals.changed") == 0
    # Filed, the call waits for a reviewer: the records decided nothing.
    request = approvals.request_approval(run, "pay", "c1", by=alice)
    assert request.status == "pending"
    assert runs.is_tool_approved(run, "pay", "c1") is None
    # A rejection only restricts the run: its creator may write it.
    runs.reject(run, "pay", "c2", by=alice)
    assert runs.is_tool_approved(run, "pay", "c2") is False
    # A tool without a rule is as before.
    runs.approve(run, "search", "c1", by=alice)
    assert runs.is_tool_approved(run, "search", "c1") is True


def test_a_records_approval_takes_the_rules_reviewers_and_its_count(
    run, reviewer, make_user, payments_team
):
    rule = oversight.create_rule("pay", reviewers=payments_team)
    carol = reviewer("carol")
    outsider = make_user("outsider", "agentstate.change_run")
    with pytest.raises(NotAReviewer):
        runs.approve(run, "pay", "c1", by=outsider)
    runs.approve(run, "pay", "c1", by=carol)
    assert runs.is_tool_approved(run, "pay", "c1") is True
    oversight.change_rule(rule, approvals_required=2)
    with pytest.raises(VotesRequired) as refused:
        runs.approve(run, "pay", "c2", always=True, by=carol)
    assert refused.value.code == "votes_required" and refused.value.status == 403
    assert "'pay' needs 2 reviewers' approvals" in refused.value.detail
    assert runs.is_tool_approved(run, "pay", "c2") is None


def test_a_rebuild_keeps_what_the_records_hold_and_adds_no_approval_of_a_ruled_tool(
    run, alice, reviewer, payments_team
):
    oversight.create_rule("pay", reviewers=payments_team)
    carol = reviewer("carol")
    request = approvals.request_approval(run, "pay", "c1", by=alice)
    approvals.decide(request, "approve", by=carol)
    held = runs.records(run)
    assert held["pay"] == {"approved": ["c1"], "rejected": []}
    # The client hands back what it holds, with a rejection and an unruled tool added.
    handed_back = {
        "pay": {"approved": ["c1"], "rejected": ["c9"]},
        "search": {"approved": True, "rejected": []},
    }
    assert runs.rebuild_approvals(run, handed_back, by=alice) == handed_back
    for added in ({"approved": ["c1", "c2"], "rejected": []}, {"approved": True, "rejected": []}):
        with pytest.raises(SelfApproval):
            runs.rebuild_approvals(run, {**handed_back, "pay": added}, by=alice)
        assert runs.records(run) == handed_back, "a refused rebuild changed the records"
    # A reviewer of the tool may.
    again = {**handed_back, "pay": {"approved": True, "rejected": []}}
    assert runs.rebuild_approvals(run, again, by=carol) == again


def test_a_policy_takes_the_rules_right_when_it_is_made(
    run, alice, reviewer, make_user, payments_team
):
    rule = oversight.create_rule("pay", reviewers=payments_team)
    outsider = make_user("outsider", "agentstate.decide_approvalrequest")
    carol = reviewer("carol")
    with pytest.raises(NotAReviewer):
        approvals.create_policy("pay", "approve", user=alice, by=outsider)
    with pytest.raises(NotAReviewer):
        approvals.create_policy("pay", "reject", by=outsider)
    with pytest.raises(SelfApproval):
        approvals.create_policy("pay", "approve", user=carol, by=carol)
    oversight.change_rule(rule, approvals_required=3)
    with pytest.raises(VotesRequired):
        approvals.create_policy("pay", "approve", user=alice, by=carol)
    assert not ApprovalPolicy.objects.exists()
    assert events_of("policy.created") == 0
    # One reject decides under any count: a reviewer's reject policy stands.
    approvals.create_policy("pay", "reject", user=alice, arguments={"to": "eve"}, by=carol)
    refused = approvals.request_approval(run, "pay", "c1", {"to": "eve"}, by=alice)
    assert refused.status == "rejected"


def test_a_policy_decides_no_call_its_rule_keeps_from_it(run, alice, reviewer, payments_team):
    carol = reviewer("carol")
    # Made before the rule wanted more than one reviewer.
    policy = approvals.create_policy("pay", "approve", user=alice, by=carol)
    rule = oversight.create_rule("pay", reviewers=payments_team)
    first = approvals.request_approval(run, "pay", "c1", by=alice)
    assert (first.status, first.policy_id) == ("approved", policy.pk)
    oversight.change_rule(rule, approvals_required=2)
    second = approvals.request_approval(run, "pay", "c2", by=alice)
    assert (second.status, second.policy_id) == ("pending", None)
    assert runs.is_tool_approved(run, "pay", "c3") is None


def test_a_policy_for_every_user_does_not_decide_its_makers_own_runs(
    alice, reviewer, payments_team
):
    oversight.create_rule("pay", reviewers=payments_team)
    carol = reviewer("carol")
    approvals.create_policy("pay", "approve", by=carol)  # every user's runs
    theirs = approvals.request_approval(runs.create_run("alices", user=alice), "pay", "c1")
    assert theirs.status == "approved"
    own = runs.create_run("carols", user=carol)
    mine = approvals.request_approval(own, "pay", "c1", by=carol)
    assert (mine.status, mine.policy_id) == ("pending", None)
    assert runs.is_tool_approved(own, "pay", "c2") is None


def test_rest_answers_the_rules_refusals_and_writes_nothing(
    run, api_for, alice, make_user, payments_team
):
    oversight.create_rule("pay", reviewers=payments_team, approvals_required=2)
    approve = api_for(alice).post(
        "/api/runs/run-1/approvals/approve/",
        {"tool_name": "pay", "call_id": "c1", "always": True},
        format="json",
    )
    assert (approve.status_code, approve.json()["code"]) == (403, "self_approval")
    rebuild = api_for(alice).put(
        "/api/runs/run-1/approvals/",
        {"pay": {"approved": ["c1"], "rejected": []}},
        format="json",
    )
    assert (rebuild.status_code, rebuild.json()["code"]) == (403, "self_approval")
    outsider = make_user("outsider", "agentstate.decide_approvalrequest")
    policy = api_for(outsider).post(
        "/api/approval-policies/",
        {"tool_name": "pay", "decision": "approve", "user": "alice"},
        format="json",
    )
    assert (policy.status_code, policy.json()["code"]) == (403, "not_a_reviewer")
    member = make_user("member", "agentstate.decide_approvalrequest")
    member.groups.add(payments_team)
    policy = api_for(member).post(
        "/api/approval-policies/",
        {"tool_name": "pay", "decision": "approve", "user": "alice"},
        format="json",
    )
    assert (policy.status_code, policy.json()["code"]) == (403, "votes_required")
    assert "needs 2 reviewers' approvals" in policy.json()["detail"]
    assert runs.records(run) == {}
    assert not ApprovalPolicy.objects.exists()


def test_always_is_refused_on_a_vote_where_the_rule_wants_several(
    run, alice, reviewer, payments_team
):
    oversight.create_rule("pay", reviewers=payments_team, approvals_required=2)
    carol, dave = reviewer("carol"), reviewer("dave")
    request = approvals.request_approval(run, "pay", "c1", by=alice)
    approvals.decide(request, "approve", by=carol)
    with pytest.raises(VotesRequired):
        approvals.decide(request, "approve", True, by=dave)
    assert approvals.approval_request(request.pk).status == "pending"
    assert events_of("approval.voted") == 1
    decided = approvals.decide(request, "approve", by=dave)
    assert decided.status == "approved"
    later = approvals.request_approval(run, "pay", "c2", by=alice)
    assert later.status == "pending", "one vote's 'always' approved a later call"
    # Rejecting for good needs one reviewer: one reject decides.
    approvals.decide(later, "reject", True, by=carol)
    assert approvals.request_approval(run, "pay", "c3", by=alice).status == "rejected"


def test_escalation_decides_the_request_not_the_tools_later_calls(
    run, alice, reviewer, leads, payments_team
):
    lead = reviewer("lead", leads)
    oversight.create_rule("pay", reviewers=payments_team, escalate_after=1800, escalate_to=leads)
    request = approvals.request_approval(run, "pay", "c1", by=alice)
    shift(request, escalate_at=-timedelta(seconds=1))
    with pytest.raises(NotAReviewer) as refused:
        approvals.decide(request, "approve", True, by=lead)
    assert "by escalation only: approve it without 'always'" in refused.value.detail
    assert approvals.approval_request(request.pk).status == "pending"
    assert approvals.decide(request, "approve", by=lead).status == "approved"
    assert approvals.request_approval(run, "pay", "c2", by=alice).status == "pending"
    # A reviewer's own "always" stands (the rule wants one approval).
    carol = reviewer("carol")
    approvals.decide(approvals.request_approval(run, "pay", "c2"), "approve", True, by=carol)
    assert approvals.request_approval(run, "pay", "c3", by=alice).status == "approved"
