"""The admin under rules: actionable only for who may decide, votes so far, the
audit trail, and rules managed through the services."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse

from agentstate.models import ApprovalRule, Event
from agentstate.services import approvals, oversight

from .conftest import shift

pytestmark = pytest.mark.django_db


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def change_url(request) -> str:
    return reverse("admin:agentstate_approvalrequest_change", args=[request.pk])


def test_only_a_reviewer_of_the_rule_gets_the_buttons(run, reviewer, make_user):
    oversight.create_rule("pay", approvals_required=2, reviewers="payments-reviewers")
    carol, dave = reviewer("carol"), reviewer("dave")
    for user in (carol, dave):
        user.is_staff = True
        user.save()
    outsider = make_user("outsider", "agentstate.decide_approvalrequest", is_staff=True)
    # a call id no random token of the page (its CSRF token) can hold by chance
    request = approvals.request_approval(run, "pay", "call-for-the-team", {"amount": 10})
    page = browser(carol).get(change_url(request)).content.decode()
    assert 'id="approve-button"' in page
    # Two approvals wanted: no "always approve" policy is offered, and "always"
    # is said to apply to a rejection only (an approve with it: votes_required).
    assert 'id="approve-policy-button"' not in page
    assert 'needs 2 approvals: "Always" applies to a rejection only' in page
    assert b'id="approve-button"' not in browser(outsider).get(change_url(request)).content
    listing = browser(outsider).get(
        reverse("admin:agentstate_approvalrequest_changelist") + "?yours=1"
    )
    assert listing.status_code == 200 and b"call-for-the-team" not in listing.content
    everyone = browser(carol).get(reverse("admin:agentstate_approvalrequest_changelist"))
    assert b"call-for-the-team" in everyone.content  # the listing shows the call id
    # a vote through the page, then the page shows it and the audit trail
    voted = browser(carol).post(change_url(request), {"_decision": "approve", "reason": "fine"})
    assert voted.status_code == 302
    page = browser(dave).get(change_url(request)).content.decode()
    assert "carol" in page and "approval.voted" in page and "approval.requested" in page
    browser(dave).post(change_url(request), {"_decision": "approve", "arguments": '{"amount": 5}'})
    request.refresh_from_db()
    assert request.status == "pending"  # dave approved other arguments: the count restarts
    assert request.votes.count() == 2


def test_an_escalation_member_is_offered_no_standing_approval(run, reviewer, leads):
    """Escalation lets its group decide the request, not the tool's later calls: the
    page offers such a member no "always approve" policy, and says that "Always"
    applies to a rejection only (the server refuses an approve with it,
    not_a_reviewer); one of the reviewers is offered both."""
    oversight.create_rule(
        "pay", reviewers="payments-reviewers", escalate_after=1800, escalate_to=leads
    )
    lead, carol = reviewer("lead", leads), reviewer("carol")
    for user in (lead, carol):
        user.is_staff = True
        user.save()
    request = approvals.request_approval(run, "pay", "call-to-escalate", {"amount": 10})
    shift(request, escalate_at=-timedelta(minutes=1))
    page = browser(lead).get(change_url(request)).content.decode()
    assert 'id="approve-button"' in page
    assert 'id="approve-policy-button"' not in page and 'id="policy"' not in page
    assert 'by its escalation, not as one of its reviewers: "Always" applies' in page
    page = browser(carol).get(change_url(request)).content.decode()
    assert 'id="approve-policy-button"' in page and "applies to a rejection only" not in page
    # what the page no longer offers, the server refuses; a rejection for good it takes
    refused = browser(lead).post(change_url(request), {"_decision": "approve", "always": "on"})
    assert refused.status_code == 302
    request.refresh_from_db()
    assert request.status == "pending"
    browser(lead).post(change_url(request), {"_decision": "reject", "always": "on"})
    request.refresh_from_db()
    assert request.status == "rejected" and request.always


def test_rules_in_the_admin_write_events(make_user, payments_team):
    admin_user = make_user("boss", is_staff=True, is_superuser=True)
    client = browser(admin_user)
    added = client.post(
        reverse("admin:agentstate_approvalrule_add"),
        {
            "tool_name": "pay",
            "approvals_required": "2",
            "reviewers": str(payments_team.pk),
            "on_deadline": "reject",
            "deadline": "3600",
            "remind_before": "900",
        },
    )
    assert added.status_code == 302, added.content
    rule = ApprovalRule.objects.get()
    assert (rule.approvals_required, rule.reviewers_id) == (2, payments_team.pk)
    assert Event.objects.filter(kind="rule.created", actor="boss").exists()
    client.post(reverse("admin:agentstate_approvalrule_delete", args=[rule.pk]), {"post": "yes"})
    assert Event.objects.filter(kind="rule.deleted").exists()
