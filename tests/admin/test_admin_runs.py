"""The reviewers' dashboard in the admin, through Django's test client."""

from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.test import Client
from django.urls import reverse

from agentstate.models import ApprovalRequest, Event, Run
from agentstate.services import approvals, runs

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:agentstate_approvalrequest_changelist")


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


def act(browser: Client, action: str, *requests: ApprovalRequest):
    return browser.post(
        CHANGELIST, {"action": action, "_selected_action": [r.pk for r in requests]}, follow=True
    )


def texts(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_the_queue_lists_pending_first_then_oldest_first(browser, run, reviewer):
    old_decided = approvals.request_approval(run, "mail", "c0")
    approvals.decide(old_decided, "approve", by=reviewer)
    newer = approvals.request_approval(run, "mail", "c2", {"to": "bob", "body": "hé"})
    older = approvals.request_approval(run, "shell", "c1", {"cmd": "ls"})
    ApprovalRequest.objects.filter(pk=older.pk).update(created_at=Now() - timedelta(hours=3))
    ApprovalRequest.objects.filter(pk=old_decided.pk).update(created_at=Now() - timedelta(hours=5))
    response = browser.get(CHANGELIST)
    assert response.status_code == 200
    assert [r.pk for r in response.context["cl"].result_list] == [
        older.pk,
        newer.pk,
        old_decided.pk,
    ]
    page = response.content.decode()
    for text in ("run-1", "shell", "c1", "&quot;cmd&quot;: &quot;ls&quot;", "3h 0m", "hé"):
        assert text in page, text


def test_list_actions_decide_through_the_service_and_count(browser, run, reviewer):
    first = approvals.request_approval(run, "mail", "c1")
    second = approvals.request_approval(run, "mail", "c2")
    response = act(browser, "approve_selected", first, second)
    assert texts(response) == ["2 requests approved."]
    assert runs.records(run) == {"mail": {"approved": ["c1", "c2"], "rejected": []}}
    assert {r.decided_by for r in ApprovalRequest.objects.all()} == {reviewer}
    assert Event.objects.filter(kind="approval.decided", actor="reviewer").count() == 2

    third = approvals.request_approval(run, "shell", "c3")
    response = act(browser, "reject_selected", first, third)
    assert texts(response) == [
        "1 request rejected.",
        "1 request was already decided and was left as it was.",
    ]
    assert ApprovalRequest.objects.get(pk=first.pk).status == "approved"
    assert runs.is_tool_approved(run, "shell", "c3") is False


def test_always_actions_decide_every_call_of_the_tool(browser, run):
    mail = approvals.request_approval(run, "mail", "c1")
    shell = approvals.request_approval(run, "shell", "c2")
    assert texts(act(browser, "always_approve_selected", mail)) == [
        "1 request approved, with every later call of the tool."
    ]
    act(browser, "always_reject_selected", shell)
    assert runs.records(run) == {
        "mail": {"approved": True, "rejected": []},
        "shell": {"approved": False, "rejected": True},
    }
    assert ApprovalRequest.objects.get(pk=mail.pk).always is True


def test_an_expired_request_is_reported_not_decided(browser, run):
    stale = approvals.request_approval(run, "mail", "c1")
    ApprovalRequest.objects.filter(pk=stale.pk).update(created_at=Now() - timedelta(days=2))
    assert texts(act(browser, "approve_selected", stale)) == [
        "1 request had expired and was not decided."
    ]
    assert runs.records(run) == {}


def test_the_pending_request_page_shows_arguments_and_context_and_decides(browser, run, reviewer):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    page = browser.get(change_url(request))
    body = page.content.decode()
    assert page.status_code == 200
    for text in (
        "&quot;to&quot;: &quot;bob&quot;",
        "&quot;ticket&quot;: &quot;T-42&quot;",
        'value="approve"',
        'value="reject"',
        'name="always"',
        'name="reason"',
    ):
        assert text in body, text
    response = browser.post(
        change_url(request),
        {"_decision": "reject", "reason": "not to bob", "always": "on"},
        follow=True,
    )
    assert response.redirect_chain[-1][0] == CHANGELIST
    stored = ApprovalRequest.objects.get(pk=request.pk)
    assert (stored.status, stored.reason, stored.always, stored.decided_by) == (
        "rejected",
        "not to bob",
        True,
        reviewer,
    )
    assert runs.records(run) == {"mail": {"approved": False, "rejected": True}}


def test_a_decided_request_is_read_only(browser, run, reviewer):
    request = approvals.request_approval(run, "mail", "c1")
    approvals.decide(request, "approve", by=reviewer)
    page = browser.get(change_url(request)).content.decode()
    assert 'value="approve"' not in page and 'name="_save"' not in page
    response = browser.post(change_url(request), {"_decision": "reject"}, follow=True)
    assert texts(response) == ["The approval request was already approved by reviewer."]
    assert ApprovalRequest.objects.get(pk=request.pk).status == "approved"


def test_a_button_on_a_request_decided_meanwhile_reports_it(browser, run, make_user):
    request = approvals.request_approval(run, "mail", "c1")
    page = browser.get(change_url(request))
    assert page.context["can_decide"]
    other = make_user("other", "agentstate.decide_approvalrequest")
    approvals.decide(request, "reject", by=other)  # e.g. over REST, while the page was open
    response = browser.post(change_url(request), {"_decision": "approve"}, follow=True)
    assert response.status_code == 200 and not response.context["can_decide"]
    assert texts(response) == ["The approval request was already rejected by other."]
    assert ApprovalRequest.objects.get(pk=request.pk).decided_by == other


def test_without_the_decide_permission_there_is_no_action_and_no_decision(run, make_user):
    viewer = make_user("viewer", "agentstate.view_approvalrequest", is_staff=True)
    client = Client()
    client.force_login(viewer)
    request = approvals.request_approval(run, "mail", "c1")
    page = client.get(CHANGELIST)
    assert page.status_code == 200 and "approve_selected" not in page.content.decode()
    act(client, "approve_selected", request)
    assert client.post(change_url(request), {"_decision": "approve"}).status_code == 403
    assert ApprovalRequest.objects.get(pk=request.pk).status == "pending"


def test_no_adding_requests_in_the_admin(browser):
    assert browser.get(reverse("admin:agentstate_approvalrequest_add")).status_code == 403


def test_the_admin_index_counts_pending_requests(browser, run, reviewer):
    approvals.request_approval(run, "mail", "c1")
    approvals.request_approval(run, "mail", "c2")
    done = approvals.request_approval(run, "mail", "c3")
    approvals.decide(done, "approve", by=reviewer)
    assert "Approval requests (2 pending)" in browser.get(reverse("admin:index")).content.decode()


def test_the_run_page_shows_usage_records_and_requests(browser, run, reviewer):
    runs.add_usage(run, input_tokens=1234, output_tokens=5)
    runs.approve(run, "mail", "c1", by=reviewer, reason="fine")
    runs.reject(run, "shell", "c0", always=True)
    approvals.request_approval(run, "search", "c9", {"q": "x"})
    page = browser.get(reverse("admin:agentstate_run_change", args=[run.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    for text in (
        "1234",
        "1239",
        "mail",
        "[&quot;c1&quot;]",
        "reviewer",
        "fine",
        "shell",
        "true",
        "search",
        "c9",
        "T-42",
    ):
        assert text in body, text
    assert browser.get(reverse("admin:agentstate_run_changelist")).status_code == 200
