"""Policies and approve-with-edits in the admin, through Django's test client (docs/admin.md)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agentstate.models import ApprovalPolicy, ApprovalRequest, Event, Run
from agentstate.services import approvals, runs

pytestmark = pytest.mark.django_db

POLICIES = reverse("admin:agentstate_approvalpolicy_changelist")


@pytest.fixture
def reviewer(make_user):
    return make_user(
        "reviewer", "agentstate.decide_approvalrequest", "agentstate.view_run", is_staff=True
    )


@pytest.fixture
def browser(reviewer) -> Client:
    client = Client()
    client.force_login(reviewer)
    return client


@pytest.fixture
def run(alice) -> Run:
    return runs.create_run("run-1", {"ticket": "T-42"}, user=alice)


def change_url(request: ApprovalRequest) -> str:
    return reverse("admin:agentstate_approvalrequest_change", args=[request.pk])


def texts(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_the_decision_box_offers_the_policy_and_the_filed_arguments(browser, run):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    page = browser.get(change_url(request)).content.decode()
    assert 'id="approve-policy-button"' in page
    assert "Approve and always approve this tool for alice" in page
    assert "&quot;to&quot;: &quot;bob&quot;" in page  # prefilled, editable
    anonymous = runs.create_run("run-2")
    other = approvals.request_approval(anonymous, "mail", "c1")
    assert 'id="approve-policy-button"' not in browser.get(change_url(other)).content.decode()


def test_approve_and_always_approve_makes_a_policy_in_one_transaction(browser, run, alice):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob", "body": "hi"})
    response = browser.post(
        change_url(request),
        {
            "_decision": "approve_policy",
            "reason": "alice may mail bob",
            "arguments": '{"body": "hi", "to": "bob"}',
            "policy_days": "7",
            "policy_arguments": '{"to": "bob"}',
        },
        follow=True,
    )
    assert response.status_code == 200
    assert any("approved by" in t for t in texts(response)), texts(response)
    decided = ApprovalRequest.objects.get(pk=request.pk)
    assert (decided.status, decided.decided_by.username, decided.approved_arguments) == (
        "approved",
        "reviewer",
        None,  # the box left as filed: no edit
    )
    policy = ApprovalPolicy.objects.get()
    assert (policy.tool_name, policy.user, policy.decision, policy.arguments) == (
        "mail",
        alice,
        "approve",
        {"to": "bob"},
    )
    assert policy.reason == "alice may mail bob" and policy.created_by.username == "reviewer"
    assert timedelta(days=6) < policy.expires_at - timezone.now() <= timedelta(days=7)
    later = approvals.request_approval(run, "mail", "c2", {"to": "bob", "body": "again"})
    assert (later.status, later.policy_id) == ("approved", policy.pk)
    other = approvals.request_approval(run, "mail", "c3", {"to": "eve"})
    assert other.status == "pending"
    # The request it decided links to it, and the policy to its decisions.
    page = browser.get(change_url(later)).content.decode()
    assert reverse("admin:agentstate_approvalpolicy_change", args=[policy.pk]) in page
    listing = browser.get(POLICIES).content.decode()
    assert f"?policy__id__exact={policy.pk}" in listing
    decisions = browser.get(
        reverse("admin:agentstate_approvalrequest_changelist"), {"policy__id__exact": policy.pk}
    )
    assert [r.pk for r in decisions.context["cl"].result_list] == [later.pk]


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"policy_days": "0"}, "1 to 3650 days"),
        ({"policy_days": "x"}, "1 to 3650 days"),
        ({"policy_arguments": "[1]"}, "must be a JSON object"),
        ({"policy_arguments": "{nope"}, "not JSON"),
        ({"arguments": "{nope"}, "not JSON"),
    ],
)
def test_bad_policy_fields_decide_nothing(browser, run, fields, message):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    response = browser.post(
        change_url(request), {"_decision": "approve_policy", **fields}, follow=True
    )
    assert any(message in t for t in texts(response)), texts(response)
    assert ApprovalRequest.objects.get(pk=request.pk).status == "pending"
    assert not ApprovalPolicy.objects.exists()
    assert not Event.objects.filter(kind__in=["approval.decided", "policy.created"]).exists()


def test_approving_with_edited_arguments_from_the_page(browser, run):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    browser.post(
        change_url(request),
        {"_decision": "approve", "arguments": '{"to": "bob@example.com"}'},
        follow=True,
    )
    decided = ApprovalRequest.objects.get(pk=request.pk)
    assert decided.arguments == {"to": "bob"}
    assert decided.approved_arguments == {"to": "bob@example.com"}
    event = Event.objects.get(kind="approval.decided")
    assert event.details["approved_arguments"] == {"to": "bob@example.com"}
    page = browser.get(change_url(decided)).content.decode()
    assert "bob@example.com" in page


def test_rejecting_with_edited_arguments_is_refused(browser, run):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    response = browser.post(
        change_url(request), {"_decision": "reject", "arguments": '{"to": "eve"}'}, follow=True
    )
    assert any("only when approving" in t for t in texts(response)), texts(response)
    assert ApprovalRequest.objects.get(pk=request.pk).status == "pending"
    # Unchanged arguments are no edit: the rejection goes through.
    browser.post(
        change_url(request), {"_decision": "reject", "arguments": '{ "to" : "bob" }'}, follow=True
    )
    assert ApprovalRequest.objects.get(pk=request.pk).status == "rejected"


def test_the_policies_list_revokes_with_its_action(browser, alice):
    policy = approvals.create_policy("mail", "approve", user=alice)
    gone = approvals.create_policy("shell", "reject")
    approvals.revoke_policy(gone)
    response = browser.post(
        POLICIES,
        {"action": "revoke_selected", "_selected_action": [policy.pk, gone.pk]},
        follow=True,
    )
    assert texts(response) == ["1 policy revoked.", "1 policy was already revoked."]
    assert ApprovalPolicy.objects.get(pk=policy.pk).revoked_by.username == "reviewer"
    page = browser.get(POLICIES).content.decode()
    assert "revoked" in page
    in_force = browser.get(POLICIES, {"active": "yes"})
    assert list(in_force.context["cl"].result_list) == []


def test_without_the_permission_no_policy_page_nor_action(make_user, alice):
    approvals.create_policy("mail", "approve", user=alice)
    staff = Client()
    staff.force_login(make_user("staff", "agentstate.view_run", is_staff=True))
    assert staff.get(POLICIES).status_code == 403
