"""Approval policies and approve-with-edits over REST (docs/rest-api.md)."""

from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.utils import timezone

from agentstate.models import ApprovalPolicy, ApprovalRequest, Event
from agentstate.services import approvals, runs

pytestmark = pytest.mark.django_db

POLICIES = "/api/approval-policies/"


@pytest.fixture
def reviewer(make_user):
    return make_user("reviewer", "agentstate.decide_approvalrequest")


@pytest.fixture
def reviewing(api_for, reviewer):
    return api_for(reviewer)


def test_a_reviewer_creates_a_policy_and_the_next_call_is_filed_decided(reviewing, api, alice):
    expires = timezone.now() + timedelta(days=7)
    created = reviewing.post(
        POLICIES,
        {
            "tool_name": "mail",
            "decision": "approve",
            "user": "alice",
            "arguments": {"to": "bob"},
            "expires_at": expires.isoformat(),
            "reason": "alice mails bob daily",
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert set(body) == {
        "id",
        "tool_name",
        "decision",
        "user",
        "arguments",
        "expires_at",
        "reason",
        "created_by",
        "created_at",
        "revoked_at",
    }
    assert (body["tool_name"], body["decision"], body["user"], body["created_by"]) == (
        "mail",
        "approve",
        "alice",
        "reviewer",
    )
    assert body["arguments"] == {"to": "bob"} and body["revoked_at"] is None
    assert body["reason"] == "alice mails bob daily" and body["expires_at"] is not None

    api.post("/api/runs/", {"run_id": "r1"}, format="json")
    filed = api.post(
        "/api/runs/r1/approval-requests/",
        {"tool_name": "mail", "call_id": "c1", "arguments": {"to": "bob", "body": "hi"}},
        format="json",
    )
    assert filed.status_code == 201, filed.content
    request = filed.json()
    assert (request["status"], request["decided_by"], request["policy"]) == (
        "approved",
        None,
        body["id"],
    )
    assert request["approved_arguments"] is None
    check = api.get("/api/runs/r1/approvals/", {"tool_name": "mail", "call_id": "c1"})
    assert check.json()["approved"] is True
    # The approvals check answers from the records and argument-free policies only.
    assert (
        api.get("/api/runs/r1/approvals/", {"tool_name": "mail", "call_id": "c9"}).json()[
            "approved"
        ]
        is None
    )


def test_a_pending_request_shows_policy_and_approved_arguments_null(api):
    api.post("/api/runs/", {"run_id": "r1"}, format="json")
    filed = api.post(
        "/api/runs/r1/approval-requests/", {"tool_name": "mail", "call_id": "c1"}, format="json"
    ).json()
    assert (filed["status"], filed["policy"], filed["approved_arguments"]) == (
        "pending",
        None,
        None,
    )


def test_revoking_over_rest(reviewing):
    policy = approvals.create_policy("mail", "approve")
    revoked = reviewing.post(f"{POLICIES}{policy.pk}/revoke/")
    assert revoked.status_code == 200, revoked.content
    assert revoked.json()["revoked_at"] is not None and revoked.json()["id"] == policy.pk
    again = reviewing.post(f"{POLICIES}{policy.pk}/revoke/")
    assert again.status_code == 409 and again.json()["code"] == "already_revoked"
    for missing in (policy.pk + 100, "abc", "-1", "9" * 40, "%00"):
        response = reviewing.post(f"{POLICIES}{missing}/revoke/")
        assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert Event.objects.filter(kind="policy.revoked").count() == 1


def test_listing_filters_and_pages(reviewing, alice, bob):
    mine = approvals.create_policy("mail", "approve", user=alice)
    everyone = approvals.create_policy("shell", "reject")
    gone = approvals.create_policy("mail", "approve", user=bob)
    approvals.revoke_policy(gone)
    expired = approvals.create_policy("mail", "reject", expires_at=timedelta(hours=1))
    ApprovalPolicy.objects.filter(pk=expired.pk).update(expires_at=Now())

    def ids(**query) -> list[int]:
        response = reviewing.get(POLICIES, query)
        assert response.status_code == 200, response.content
        return [row["id"] for row in response.json()["results"]]

    assert ids() == [expired.pk, gone.pk, everyone.pk, mine.pk]
    assert ids(tool_name="shell") == [everyone.pk]
    assert ids(user="alice") == [mine.pk]
    assert ids(user="nobody") == []
    assert ids(active="true") == [everyone.pk, mine.pk]
    assert ids(active="false") == [expired.pk, gone.pk]
    page = reviewing.get(POLICIES, {"page_size": 2}).json()
    assert page["count"] == 4 and len(page["results"]) == 2 and page["next"]
    first = reviewing.get(POLICIES, {"user": "alice"}).json()["results"][0]
    assert (first["user"], first["created_by"]) == ("alice", None)


@pytest.mark.parametrize(
    "body,field",
    [
        ({"decision": "approve"}, "tool_name"),
        ({"tool_name": "mail"}, "decision"),
        ({"tool_name": "mail", "decision": "maybe"}, "decision"),
        ({"tool_name": "", "decision": "approve"}, "tool_name"),
        ({"tool_name": "mail", "decision": "approve", "user": "nobody"}, "user"),
        ({"tool_name": "mail", "decision": "approve", "user": 5}, "user"),
        ({"tool_name": "mail", "decision": "approve", "arguments": [1]}, "arguments"),
        ({"tool_name": "mail", "decision": "approve", "arguments": "x"}, "arguments"),
        ({"tool_name": "mail", "decision": "approve", "expires_at": "soon"}, "expires_at"),
        ({"tool_name": "mail", "decision": "approve", "expires_at": 5}, "expires_at"),
        (
            {"tool_name": "mail", "decision": "approve", "expires_at": "2000-01-01T00:00:00Z"},
            "expires_at",
        ),
        (
            {"tool_name": "mail", "decision": "approve", "expires_at": "9999-12-31T23:59:59-12:00"},
            "expires_at",
        ),
        ({"tool_name": "mail", "decision": "approve", "reason": 1}, "reason"),
        ({"tool_name": "mail", "decision": "approve", "always": True}, "always"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(reviewing, body, field):
    response = reviewing.post(POLICIES, body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid" and response.json()["field"] == field
    assert not ApprovalPolicy.objects.exists() and not Event.objects.exists()


@pytest.mark.parametrize(
    "query,field",
    [({"active": "yes"}, "active"), ({"tool_name": ""}, "tool_name"), ({"x": "1"}, "x")],
)
def test_a_bad_listing_filter_is_a_400(reviewing, query, field):
    response = reviewing.get(POLICIES, query)
    assert response.status_code == 400 and response.json()["field"] == field


def test_approving_with_edited_arguments_over_rest(api, reviewing):
    api.post("/api/runs/", {"run_id": "r1"}, format="json")
    filed = api.post(
        "/api/runs/r1/approval-requests/",
        {"tool_name": "mail", "call_id": "c1", "arguments": {"to": "bob"}},
        format="json",
    ).json()
    refused = reviewing.post(
        f"/api/approval-requests/{filed['id']}/decide/",
        {"decision": "reject", "arguments": {"to": "eve"}},
        format="json",
    )
    assert refused.status_code == 400 and refused.json()["field"] == "arguments"
    assert ApprovalRequest.objects.get(pk=filed["id"]).status == "pending"
    decided = reviewing.post(
        f"/api/approval-requests/{filed['id']}/decide/",
        {"decision": "approve", "arguments": {"to": "bob@example.com"}},
        format="json",
    )
    assert decided.status_code == 200, decided.content
    body = decided.json()
    assert (body["arguments"], body["approved_arguments"]) == (
        {"to": "bob"},
        {"to": "bob@example.com"},
    )
    shown = api.get(f"/api/approval-requests/{filed['id']}/").json()
    assert shown["approved_arguments"] == {"to": "bob@example.com"}
    assert runs.is_tool_approved("r1", "mail", "c1") is True
