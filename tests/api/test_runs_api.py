"""Runs, usage, approvals and the review queue over REST: codes, shapes, access (docs/rest-api.md)."""

from datetime import datetime, timedelta

import pytest
from django.db.models.functions import Now

from agentstate.models import ApprovalRequest, Run
from agentstate.services import approvals, runs
from agentstate.types import arguments_digest

pytestmark = pytest.mark.django_db

ZERO = dict.fromkeys(Run.USAGE_FIELDS, 0)


@pytest.fixture
def reviewer(make_user):
    return make_user("reviewer", "agentstate.decide_approvalrequest")


def make_run(api, run_id="run-1", **body):
    response = api.post("/api/runs/", {"run_id": run_id, **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def error(response, status: int, code: str, field: str | None = None) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code and body["detail"], body
    if field is not None:
        assert body["field"] == field, body


def test_create_get_and_patch_a_run(api):
    assert make_run(api, context={"user": 7}) == {
        "run_id": "run-1",
        "context": {"user": 7},
        "usage": ZERO,
        "approvals": {},
    }
    assert api.get("/api/runs/run-1/").json()["context"] == {"user": 7}
    patched = api.patch("/api/runs/run-1/", {"context": [1, None]}, format="json")
    assert patched.status_code == 200 and patched.json()["context"] == [1, None]
    generated = api.post("/api/runs/", {}, format="json")
    assert generated.status_code == 201 and len(generated.json()["run_id"]) == 36


def test_run_errors(api, api_for, bob):
    make_run(api)
    error(api.post("/api/runs/", {"run_id": "run-1"}, format="json"), 409, "run_exists")
    error(api.get("/api/runs/nope/"), 404, "run_not_found")
    error(api_for(bob).get("/api/runs/run-1/"), 404, "run_not_found")
    error(
        api_for(bob).patch("/api/runs/run-1/", {"context": 1}, format="json"), 404, "run_not_found"
    )
    for bad in ("..", "a b", "x" * 129, 5):
        error(api.post("/api/runs/", {"run_id": bad}, format="json"), 400, "invalid", "run_id")
    error(
        api.post("/api/runs/", {"run_id": "r2", "extra": 1}, format="json"), 400, "invalid", "extra"
    )
    error(
        api.patch("/api/runs/run-1/", {"context": 1, "usage": {}}, format="json"),
        400,
        "invalid",
        "usage",
    )
    unchanged = api.patch("/api/runs/run-1/", {}, format="json")  # a partial update of nothing
    assert unchanged.status_code == 200 and unchanged.json()["context"] == {}
    assert Run.objects.count() == 1


def test_usage_accumulates_over_rest(api):
    make_run(api)
    first = api.post(
        "/api/runs/run-1/usage/", {"input_tokens": 10, "output_tokens": 5}, format="json"
    )
    assert first.status_code == 200 and first.json() == {
        **ZERO,
        "requests": 1,
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
    }
    second = api.post(
        "/api/runs/run-1/usage/",
        {"requests": 0, "total_tokens": 1, "reasoning_tokens": 2},
        format="json",
    )
    assert second.json() == {
        **ZERO,
        "requests": 1,
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 16,
        "reasoning_tokens": 2,
    }
    for field, value in [
        ("input_tokens", -1),
        ("requests", "1"),
        ("cached_tokens", 1.0),
        ("total_tokens", 2**53 + 1),
        ("output_tokens", True),
    ]:
        error(
            api.post("/api/runs/run-1/usage/", {field: value}, format="json"), 400, "invalid", field
        )
    error(
        api.post("/api/runs/run-1/usage/", {"tokens": 1}, format="json"), 400, "invalid", "tokens"
    )
    error(api.post("/api/runs/nope/usage/", {}, format="json"), 404, "run_not_found")
    assert api.get("/api/runs/run-1/").json()["usage"] == second.json()


def test_approvals_query_approve_reject_and_rebuild(api):
    make_run(api)
    check = api.get("/api/runs/run-1/approvals/", {"tool_name": "mail", "call_id": "c1"})
    assert check.status_code == 200 and check.json() == {
        "tool_name": "mail",
        "call_id": "c1",
        "approved": None,
    }
    approved = api.post(
        "/api/runs/run-1/approvals/approve/", {"tool_name": "mail", "call_id": "c1"}, format="json"
    )
    assert approved.status_code == 200 and approved.json() == {
        "mail": {"approved": ["c1"], "rejected": []}
    }
    assert (
        api.get("/api/runs/run-1/approvals/", {"tool_name": "mail", "call_id": "c1"}).json()[
            "approved"
        ]
        is True
    )
    rejected = api.post(
        "/api/runs/run-1/approvals/reject/",
        {"tool_name": "shell", "call_id": "c2", "always": True},
        format="json",
    )
    assert rejected.json()["shell"] == {"approved": False, "rejected": True}
    assert (
        api.get("/api/runs/run-1/approvals/", {"tool_name": "shell", "call_id": "c9"}).json()[
            "approved"
        ]
        is False
    )
    records = {
        "mail": {"approved": True, "rejected": []},
        "x": {"approved": ["a"], "rejected": ["a"]},
    }
    put = api.put("/api/runs/run-1/approvals/", records, format="json")
    assert put.status_code == 200 and put.json() == records
    assert api.get("/api/runs/run-1/approvals/").json() == records
    assert api.get("/api/runs/run-1/").json()["approvals"] == records


def test_approvals_errors(api, api_for, bob):
    make_run(api)
    for query, field in [
        ({"tool_name": "mail"}, "call_id"),
        ({"call_id": "c1"}, "tool_name"),
        ({"tool": "x"}, "tool"),
    ]:
        error(api.get("/api/runs/run-1/approvals/", query), 400, "invalid", field)
    for body, field in [
        ({"tool_name": "mail"}, "call_id"),
        ({"tool_name": "mail", "call_id": "c", "always": "yes"}, "always"),
        ({"tool_name": "", "call_id": "c"}, "tool_name"),
    ]:
        error(
            api.post("/api/runs/run-1/approvals/approve/", body, format="json"),
            400,
            "invalid",
            field,
        )
    for body, field in [
        ({"mail": {"approved": "yes", "rejected": []}}, "mail.approved"),
        ([1], "approvals"),
        ({"mail": {"approved": [], "rejected": [7]}}, "mail.rejected.0"),
    ]:
        error(api.put("/api/runs/run-1/approvals/", body, format="json"), 400, "invalid", field)
    stranger = api_for(bob)
    error(stranger.get("/api/runs/run-1/approvals/"), 404, "run_not_found")
    error(
        stranger.post(
            "/api/runs/run-1/approvals/reject/", {"tool_name": "m", "call_id": "c"}, format="json"
        ),
        404,
        "run_not_found",
    )
    error(stranger.put("/api/runs/run-1/approvals/", {}, format="json"), 404, "run_not_found")
    assert api.get("/api/runs/run-1/approvals/").json() == {}


def test_approval_requests_filed_listed_and_decided(api, api_for, reviewer, alice):
    make_run(api)
    body = {"tool_name": "mail", "call_id": "c1", "arguments": {"to": "bob"}}
    created = api.post("/api/runs/run-1/approval-requests/", body, format="json")
    assert created.status_code == 201
    request = created.json()
    filed_at = datetime.fromisoformat(request["created_at"])
    assert datetime.fromisoformat(request["deadline"]) == filed_at + timedelta(days=1)
    assert {k: v for k, v in request.items() if k not in ("id", "created_at", "deadline")} == {
        "run_id": "run-1",
        "tool_name": "mail",
        "call_id": "c1",
        "arguments": {"to": "bob"},
        "status": "pending",
        "decided_by": None,
        "decided_at": None,
        "reason": "",
        "policy": None,
        "approved_arguments": None,
        # Under no approval rule: one decision, no votes, APPROVAL_TTL (a day) after filing.
        "approvals_required": 1,
        "votes": [],
        "arguments_digest": arguments_digest({"to": "bob"}),
    }
    again = api.post("/api/runs/run-1/approval-requests/", body, format="json")
    assert again.status_code == 200 and again.json()["id"] == request["id"]
    listed = api.get(
        "/api/approval-requests/", {"status": "pending", "run_id": "run-1", "tool_name": "mail"}
    ).json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == request["id"]
    assert api.get("/api/approval-requests/", {"status": "approved"}).json()["count"] == 0
    assert api.get(f"/api/approval-requests/{request['id']}/").json() == request

    decide = f"/api/approval-requests/{request['id']}/decide/"
    error(api.post(decide, {"decision": "approve"}, format="json"), 403, "permission_denied")
    as_reviewer = api_for(reviewer)
    assert as_reviewer.get("/api/approval-requests/").json()["count"] == 1  # the queue it decides
    decided = as_reviewer.post(decide, {"decision": "approve", "reason": "fine"}, format="json")
    assert decided.status_code == 200
    body = decided.json()
    assert (body["status"], body["decided_by"], body["reason"]) == ("approved", "reviewer", "fine")
    assert body["decided_at"]
    assert (
        api.get("/api/runs/run-1/approvals/", {"tool_name": "mail", "call_id": "c1"}).json()[
            "approved"
        ]
        is True
    )
    error(as_reviewer.post(decide, {"decision": "reject"}, format="json"), 409, "already_decided")
    # Filed after the decision, another call of an always-approved tool is decided at once.
    as_reviewer_always = as_reviewer.post(
        f"/api/approval-requests/{api.post('/api/runs/run-1/approval-requests/', {'tool_name': 'mail', 'call_id': 'c2'}, format='json').json()['id']}/decide/",
        {"decision": "approve", "always": True},
        format="json",
    )
    assert as_reviewer_always.status_code == 200
    third = api.post(
        "/api/runs/run-1/approval-requests/", {"tool_name": "mail", "call_id": "c3"}, format="json"
    )
    assert (
        third.status_code == 201
        and third.json()["status"] == "approved"
        and third.json()["decided_by"] is None
    )


def test_review_queue_errors_and_access(api, api_for, reviewer, bob, make_user):
    make_run(api)
    request = api.post(
        "/api/runs/run-1/approval-requests/", {"tool_name": "mail", "call_id": "c1"}, format="json"
    ).json()
    path = f"/api/approval-requests/{request['id']}/"
    stranger = api_for(bob)
    error(stranger.get(path), 404, "approval_request_not_found")
    assert stranger.get("/api/approval-requests/").json()["count"] == 0
    error(
        stranger.post(
            "/api/runs/run-1/approval-requests/", {"tool_name": "m", "call_id": "c"}, format="json"
        ),
        404,
        "run_not_found",
    )
    error(
        stranger.post(path + "decide/", {"decision": "approve"}, format="json"),
        403,
        "permission_denied",
    )
    error(
        stranger.post(
            "/api/approval-requests/999999/decide/", {"decision": "approve"}, format="json"
        ),
        403,
        "permission_denied",
    )
    viewer = api_for(make_user("viewer", "agentstate.view_approvalrequest", "agentstate.view_run"))
    assert viewer.get(path).status_code == 200 and viewer.get("/api/runs/run-1/").status_code == 200
    error(viewer.patch("/api/runs/run-1/", {"context": 1}, format="json"), 404, "run_not_found")
    as_reviewer = api_for(reviewer)
    error(as_reviewer.get("/api/approval-requests/999999/"), 404, "approval_request_not_found")
    error(
        as_reviewer.post(
            "/api/approval-requests/999999/decide/", {"decision": "approve"}, format="json"
        ),
        404,
        "approval_request_not_found",
    )
    for body, field in [
        ({"decision": "maybe"}, "decision"),
        ({}, "decision"),
        ({"decision": "approve", "always": 1}, "always"),
        ({"decision": "approve", "reason": 3}, "reason"),
        ({"decision": "approve", "status": "approved"}, "status"),
        ({"decision": "approve", "decided_by": "x"}, "decided_by"),
    ]:
        error(as_reviewer.post(path + "decide/", body, format="json"), 400, "invalid", field)
    for query, field in [
        ({"status": "done"}, "status"),
        ({"run_id": ".."}, "run_id"),
        ({"owner": "x"}, "owner"),
    ]:
        error(api.get("/api/approval-requests/", query), 400, "invalid", field)
    for body, field in [
        ({"tool_name": "mail"}, "call_id"),
        ({"tool_name": "m", "call_id": "c", "status": "approved"}, "status"),
    ]:
        error(
            api.post("/api/runs/run-1/approval-requests/", body, format="json"),
            400,
            "invalid",
            field,
        )
    assert ApprovalRequest.objects.get().status == "pending"


def test_expired_requests_read_expired_and_refuse_a_decision(api, api_for, reviewer):
    make_run(api)
    request = api.post(
        "/api/runs/run-1/approval-requests/", {"tool_name": "mail", "call_id": "c1"}, format="json"
    ).json()
    ApprovalRequest.objects.filter(pk=request["id"]).update(created_at=Now() - timedelta(days=2))
    assert api.get(f"/api/approval-requests/{request['id']}/").json()["status"] == "expired"
    assert api.get("/api/approval-requests/", {"status": "pending"}).json()["count"] == 0
    assert api.get("/api/approval-requests/", {"status": "expired"}).json()["count"] == 1
    again = api.post(
        "/api/runs/run-1/approval-requests/", {"tool_name": "mail", "call_id": "c1"}, format="json"
    )
    assert again.status_code == 200 and again.json()["status"] == "expired"
    error(
        api_for(reviewer).post(
            f"/api/approval-requests/{request['id']}/decide/",
            {"decision": "approve"},
            format="json",
        ),
        410,
        "expired",
    )
    assert runs.records(Run.objects.get()) == {}


def test_a_holder_of_change_run_reaches_every_run(api, api_for, make_user):
    make_run(api)
    agent = api_for(make_user("agent", "agentstate.change_run"))
    assert agent.get("/api/runs/run-1/").status_code == 200
    assert agent.post("/api/runs/run-1/usage/", {}, format="json").json()["requests"] == 1
    assert (
        agent.post(
            "/api/runs/run-1/approvals/approve/", {"tool_name": "m", "call_id": "c"}, format="json"
        ).status_code
        == 200
    )
    filed = agent.post(
        "/api/runs/run-1/approval-requests/", {"tool_name": "m", "call_id": "c"}, format="json"
    )
    assert filed.status_code == 201 and filed.json()["status"] == "approved"
    assert (
        approvals.with_current_status(ApprovalRequest.objects.all()).get().current_status
        == "approved"
    )


@pytest.mark.parametrize(
    "pk", ["0", "9223372036854775807", "9223372036854775808", "99999999999999999999"]
)
def test_request_ids_beyond_a_64_bit_key_are_not_found(api_for, reviewer, pk):
    """Up to 20 digits read as an id (more is no id): past the key's range, a 404, not a 500."""
    reviewing = api_for(reviewer)
    response = reviewing.get(f"/api/approval-requests/{pk}/")
    error(response, 404, "approval_request_not_found")
    response = reviewing.post(
        f"/api/approval-requests/{pk}/decide/", {"decision": "approve"}, format="json"
    )
    error(response, 404, "approval_request_not_found")
