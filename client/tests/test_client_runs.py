"""The REST client's run, usage, approval and review-queue calls against a live server."""

from datetime import timedelta

import pytest
from django.db.models.functions import Now

from agentstate.models import ApprovalRequest
from agentstate_client import (
    AlreadyDecided,
    ApprovalRequestExpired,
    ApprovalRequestNotFound,
    InvalidInput,
    PermissionDenied,
    RunExists,
    RunNotFound,
)

pytestmark = pytest.mark.django_db(transaction=True)

ZERO = {
    "requests": 0,
    "input_tokens": 0,
    "output_tokens": 0,
    "total_tokens": 0,
    "cached_tokens": 0,
    "reasoning_tokens": 0,
}


def test_create_get_update_run(ac):
    run = ac.create_run("run-1", {"user": 7})
    assert run == {"run_id": "run-1", "context": {"user": 7}, "usage": ZERO, "approvals": {}}
    assert ac.get_run("run-1") == run
    assert ac.update_run("run-1", {"user": 8})["context"] == {"user": 8}
    generated = ac.create_run()
    assert generated["run_id"] and ac.get_run(generated["run_id"])["run_id"] == generated["run_id"]


def test_run_refusals(ac, remote, bob):
    ac.create_run("run-1")
    with pytest.raises(RunExists) as caught:
        ac.create_run("run-1")
    assert (caught.value.status, caught.value.code) == (409, "run_exists")
    for call in (lambda: ac.get_run("nope"), lambda: remote(bob).get_run("run-1")):
        with pytest.raises(RunNotFound) as caught:
            call()
    with pytest.raises(InvalidInput) as caught:
        ac.create_run("..")
    assert caught.value.field == "run_id"


def test_usage_accumulates(ac):
    ac.create_run("run-1")
    ac.add_usage("run-1", input_tokens=10, output_tokens=5)
    usage = ac.add_usage("run-1", requests=2, input_tokens=1, total_tokens=100, cached_tokens=3)
    assert usage == {
        "requests": 3,
        "input_tokens": 11,
        "output_tokens": 5,
        "total_tokens": 115,
        "cached_tokens": 3,
        "reasoning_tokens": 0,
    }
    with pytest.raises(InvalidInput) as caught:
        ac.add_usage("run-1", input_tokens=-1)
    assert caught.value.field == "input_tokens"
    assert ac.get_run("run-1")["usage"] == usage


def test_approval_records(ac):
    ac.create_run("run-1")
    assert ac.is_tool_approved("run-1", "mail", "c1") is None
    assert ac.approve("run-1", "mail", "c1") == {"mail": {"approved": ["c1"], "rejected": []}}
    assert ac.is_tool_approved("run-1", "mail", "c1") is True
    ac.reject("run-1", "shell", "c2", always=True)
    assert ac.is_tool_approved("run-1", "shell", "c9") is False
    assert ac.approvals("run-1")["shell"] == {"approved": False, "rejected": True}
    records = {"mail": {"approved": True, "rejected": []}}
    assert ac.rebuild_approvals("run-1", records) == records
    assert ac.approvals("run-1") == records
    with pytest.raises(InvalidInput):
        ac.rebuild_approvals("run-1", {"mail": {"approved": "yes", "rejected": []}})


def test_review_queue(ac, remote, make_user):
    ac.create_run("run-1")
    request, created = ac.request_approval("run-1", "mail", "c1", {"to": "bob"})
    assert created and request["status"] == "pending" and request["arguments"] == {"to": "bob"}
    again, created = ac.request_approval("run-1", "mail", "c1", {"to": "bob"})
    assert not created and again["id"] == request["id"]
    assert [r["id"] for r in ac.list_approval_requests(status="pending", run_id="run-1")] == [
        request["id"]
    ]
    assert ac.get_approval_request(request["id"])["call_id"] == "c1"

    with pytest.raises(PermissionDenied):
        ac.decide(request["id"], "approve")
    reviewer = remote(make_user("reviewer", "agentstate.decide_approvalrequest"))
    decided = reviewer.decide(request["id"], "approve", reason="fine")
    assert (decided["status"], decided["decided_by"], decided["reason"]) == (
        "approved",
        "reviewer",
        "fine",
    )
    assert ac.is_tool_approved("run-1", "mail", "c1") is True
    with pytest.raises(AlreadyDecided) as caught:
        reviewer.decide(request["id"], "reject")
    with pytest.raises(ApprovalRequestNotFound) as caught:
        reviewer.decide(10**9, "approve")
    assert caught.value.status == 404
    with pytest.raises(ApprovalRequestNotFound):
        ac.get_approval_request(10**9)


def test_deciding_an_expired_request_is_refused(ac, remote, make_user):
    ac.create_run("run-1")
    request, _ = ac.request_approval("run-1", "mail", "c1")
    ApprovalRequest.objects.filter(pk=request["id"]).update(created_at=Now() - timedelta(days=2))
    reviewer = remote(make_user("reviewer", "agentstate.decide_approvalrequest"))
    with pytest.raises(ApprovalRequestExpired) as caught:
        reviewer.decide(request["id"], "approve")
    assert (caught.value.status, caught.value.code) == (410, "expired")


def test_policies_and_approving_with_edits(ac, remote, make_user):
    from agentstate_client import AlreadyRevoked, PolicyNotFound

    reviewer = remote(make_user("reviewer", "agentstate.decide_approvalrequest"))
    with pytest.raises(PermissionDenied):
        ac.list_policies()
    policy = reviewer.create_policy(
        "mail", "approve", user="alice", arguments={"to": "bob"}, reason="often"
    )
    assert (policy["user"], policy["created_by"], policy["revoked_at"]) == (
        "alice",
        "reviewer",
        None,
    )
    ac.create_run("run-1")
    request, created = ac.request_approval("run-1", "mail", "c1", {"to": "bob", "body": "x"})
    assert created and (request["status"], request["policy"]) == ("approved", policy["id"])
    assert [p["id"] for p in reviewer.list_policies(active=True, user="alice")] == [policy["id"]]
    revoked = reviewer.revoke_policy(policy["id"])
    assert revoked["revoked_at"] is not None and reviewer.list_policies(active=True) == []
    with pytest.raises(AlreadyRevoked):
        reviewer.revoke_policy(policy["id"])
    with pytest.raises(PolicyNotFound):
        reviewer.revoke_policy(policy["id"] + 100)
    with pytest.raises(InvalidInput) as caught:
        reviewer.create_policy("mail", "approve", user="nobody")
    assert caught.value.field == "user"

    pending, _ = ac.request_approval("run-1", "mail", "c2", {"to": "bob"})
    assert pending["status"] == "pending"
    decided = reviewer.decide(pending["id"], "approve", arguments={"to": "carol"})
    assert (decided["arguments"], decided["approved_arguments"]) == ({"to": "bob"}, {"to": "carol"})
