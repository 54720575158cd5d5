"""The status transitions the database holds: a row in a state no service can
reach is refused, on every supported database."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from agentstate.models import (
    ApprovalPolicy,
    ApprovalRequest,
    Delivery,
    Event,
    PausedRun,
    Run,
    Webhook,
)

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def pause(**fields) -> PausedRun:
    return PausedRun.objects.create(
        chat_id="chat", tool_call_id="call", owner="alice", expires_at=NOW, **fields
    )


def request(**fields) -> ApprovalRequest:
    run, _ = Run.objects.get_or_create(run_id="run")
    return ApprovalRequest.objects.create(run=run, tool_name="t", call_id="c", **fields)


def delivery(**fields) -> Delivery:
    # inactive: no outbox trigger writes the delivery first
    hook = Webhook.objects.create(url="https://example.com/", secret="s", active=False)
    event = Event.objects.create(kind="pause.created", object_type="pause", object_id="x")
    return Delivery.objects.create(webhook=hook, event=event, **fields)


def refused(make, constraint: str) -> None:
    """``make`` is refused by ``constraint`` (each database names it in its message)."""
    with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
        make()


@pytest.mark.parametrize(
    ("fields", "constraint"),
    [
        ({"status": "claimed"}, "agentstate_pause_claimed_at"),
        ({"status": "resolved", "resolved_at": NOW}, "agentstate_pause_claimed_at"),
        ({"status": "resolved", "claimed_at": NOW}, "agentstate_pause_resolved_at"),
        ({"status": "pending", "claimed_at": NOW}, "agentstate_pause_claimed_at"),
        ({"status": "expired", "claimed_at": NOW}, "agentstate_pause_claimed_at"),
        (
            {"status": "claimed", "claimed_at": NOW, "resolved_at": NOW},
            "agentstate_pause_resolved_at",
        ),
    ],
)
def test_a_pause_in_no_reachable_state_is_refused(fields, constraint):
    refused(lambda: pause(**fields), constraint)


@pytest.mark.parametrize(
    "fields",
    [
        {"status": "pending"},
        {"status": "expired"},
        {"status": "claimed", "claimed_at": NOW},
        {"status": "resolved", "claimed_at": NOW, "resolved_at": NOW},
    ],
)
def test_every_state_a_pause_reaches_is_kept(fields):
    assert pause(**fields).pk


@pytest.mark.parametrize(
    ("fields", "constraint"),
    [
        ({"status": "approved"}, "agentstate_request_decided_at"),
        ({"status": "rejected"}, "agentstate_request_decided_at"),
        ({"status": "pending", "decided_at": NOW}, "agentstate_request_decided_at"),
        ({"status": "expired", "decided_at": NOW}, "agentstate_request_decided_at"),
        (
            {"status": "rejected", "decided_at": NOW, "approved_arguments": {"a": 1}},
            "agentstate_request_edit_approved",
        ),
    ],
)
def test_a_request_in_no_reachable_state_is_refused(fields, constraint):
    refused(lambda: request(**fields), constraint)


def test_only_a_decided_request_names_its_decider_and_policy(alice):
    policy = ApprovalPolicy.objects.create(tool_name="t", decision="approve")
    refused(lambda: request(decided_by=alice), "agentstate_request_decided_by")
    refused(lambda: request(policy=policy), "agentstate_request_policy_decided")
    assert request(status="approved", decided_at=NOW, decided_by=alice, policy=policy).pk


def test_a_delivery_is_delivered_exactly_when_it_has_a_delivered_at():
    refused(lambda: delivery(status="delivered"), "agentstate_delivery_delivered_at")
    refused(lambda: delivery(status="failed", delivered_at=NOW), "agentstate_delivery_delivered_at")
    assert delivery(status="delivered", delivered_at=NOW).pk


def test_a_policy_names_who_revoked_it_only_with_when(alice):
    refused(
        lambda: ApprovalPolicy.objects.create(tool_name="t", decision="approve", revoked_by=alice),
        "agentstate_policy_revoked_at",
    )
    revoked = ApprovalPolicy.objects.create(
        tool_name="t", decision="approve", revoked_by=alice, revoked_at=NOW - timedelta(1)
    )
    assert revoked.pk
