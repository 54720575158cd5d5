"""A user's own rows, as the QuerySet methods select them."""

import pytest

from agentstate.models import ApprovalPolicy, ApprovalRequest, Event, PausedRun, Run
from agentstate.services import approvals, pauses, runs

pytestmark = pytest.mark.django_db


def test_each_model_selects_the_rows_of_a_user(alice, bob):
    mine = runs.create_run("mine", user=alice)
    runs.create_run("theirs", user=bob)
    assert list(Run.objects.created_by_user(alice)) == [mine]
    assert list(Run.objects.created_by_user(alice.pk)) == [mine]

    pauses.put("chat", "made", "bob", 1, by=alice)
    pauses.put("chat", "owned", "alice", 1, by=bob)
    pauses.put("chat", "other", "bob", 1, by=bob)
    own = PausedRun.objects.created_or_owned_by(alice)
    assert sorted(own.values_list("tool_call_id", flat=True)) == ["made", "owned"]

    filed = approvals.request_approval(mine, "mail", "c1", by=alice)
    approvals.request_approval(mine, "mail", "c2", by=bob)
    assert list(ApprovalRequest.objects.filed_by(alice)) == [filed]

    events = Event.objects.visible_to(alice)
    assert {e.object_type for e in events} == {"pausedrun", "approvalrequest"}
    assert Event.objects.visible_to(bob, ["approvalrequest"]).count() == 5  # 3 pauses, 2 requests

    policy = approvals.create_policy("mail", "approve", user=alice)
    approvals.create_policy("mail", "approve", user=bob)
    assert list(ApprovalPolicy.objects.of_user(alice)) == [policy]
    assert list(ApprovalPolicy.objects.of_user("alice")) == [policy]
