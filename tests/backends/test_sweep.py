"""The expiry sweep: what it expires, what it purges, its events, its command and task."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db.models.functions import Now
from django.utils import timezone

from agentstate.models import ApprovalRequest, Event, PausedRun, Run
from agentstate.services import pauses
from agentstate.services.sweep import sweep
from agentstate.tasks import expire_pauses

pytestmark = pytest.mark.django_db


def pause(
    call: str, *, due_in: float = 3600, status: str = "pending", owner: str = "alice", **extra
) -> PausedRun:
    if status in (PausedRun.Status.CLAIMED, PausedRun.Status.RESOLVED):
        extra.setdefault("claimed_at", timezone.now())  # a claimed pause has one
    return PausedRun.objects.create(
        chat_id="chat",
        tool_call_id=call,
        owner=owner,
        status=status,
        expires_at=timezone.now() + timedelta(seconds=due_in),
        **extra,
    )


def statuses() -> dict[str, str]:
    return dict(PausedRun.objects.values_list("tool_call_id", "status"))


def request(call: str, age: timedelta, status: str = "pending") -> ApprovalRequest:
    run, _ = Run.objects.get_or_create(run_id="run-1")
    decided = status in (ApprovalRequest.Status.APPROVED, ApprovalRequest.Status.REJECTED)
    req = ApprovalRequest.objects.create(
        run=run,
        tool_name="shell",
        call_id=call,
        status=status,
        decided_at=timezone.now() if decided else None,
    )
    ApprovalRequest.objects.filter(pk=req.pk).update(created_at=Now() - age)
    return req


def test_sweep_expires_only_pending_pauses_past_their_expiry(alice):
    pause("due", due_in=-1, created_by=alice)
    pause("later")
    pause("claimed-due", due_in=-1, status="claimed")
    pause("resolved-due", due_in=-1, status="resolved", resolved_at=timezone.now())
    result = sweep()
    assert result.expired_pauses == 1
    assert statuses() == {
        "due": "expired",
        "later": "pending",
        "claimed-due": "claimed",
        "resolved-due": "resolved",
    }
    event = Event.objects.get(kind="pause.expired")
    assert (event.object_id, event.owner, event.created_by, event.actor) == (
        "chat#due",
        "alice",
        alice,
        "sweeper",
    )
    assert event.details == {
        "question_id": str(PausedRun.objects.get(tool_call_id="due").question_id)
    }


def test_sweep_is_idempotent():
    pause("due", due_in=-1)
    assert sweep().expired_pauses == 1
    assert sweep().as_dict() == {
        "expired_pauses": 0,
        "expired_approval_requests": 0,
        "purged_pauses": 0,
        "purged_events": 0,
        "purged_threads": 0,
        "purged_store_items": 0,
    }
    assert Event.objects.filter(kind="pause.expired").count() == 1


def test_sweep_works_in_batches_and_reports_progress():
    for i in range(10):
        pause(f"due-{i}", due_in=-1)
    seen = []
    result = sweep(batch_size=3, progress=lambda label, total: seen.append((label, total)))
    assert result.expired_pauses == 10
    assert seen == [
        ("expired pauses", 3),
        ("expired pauses", 6),
        ("expired pauses", 9),
        ("expired pauses", 10),
    ]
    assert set(statuses().values()) == {"expired"}
    assert Event.objects.filter(kind="pause.expired").count() == 10


def test_sweep_deletes_finished_pauses_past_retention(settings):
    settings.AGENTSTATE = {"RETENTION": timedelta(days=30)}
    old, recent = timezone.now() - timedelta(days=31), timezone.now() - timedelta(days=29)
    pause("old-resolved", status="resolved", resolved_at=old)
    pause("recent-resolved", status="resolved", resolved_at=recent)
    pause("old-expired", status="expired", due_in=-31 * 86400)
    pause("recent-expired", status="expired", due_in=-29 * 86400)
    pause("old-claimed", status="claimed", claimed_at=old, due_in=-31 * 86400)
    result = sweep(batch_size=1)
    assert result.purged_pauses == 2
    assert statuses() == {
        "recent-resolved": "resolved",
        "recent-expired": "expired",
        "old-claimed": "claimed",
    }


def test_a_pause_expired_by_the_sweep_is_purged_after_retention(settings):
    settings.AGENTSTATE = {"RETENTION": 60}
    pause("long-due", due_in=-120)
    result = sweep()
    assert (result.expired_pauses, result.purged_pauses) == (1, 1)
    assert not PausedRun.objects.exists()
    assert Event.objects.filter(kind="pause.expired", object_id="chat#long-due").exists()


def test_sweep_expires_pending_approval_requests_older_than_the_approval_ttl(settings, alice):
    settings.AGENTSTATE = {"APPROVAL_TTL": timedelta(hours=1)}
    stale = request("stale", timedelta(hours=2))
    ApprovalRequest.objects.filter(pk=stale.pk).update(created_by=alice)
    request("fresh", timedelta(minutes=5))
    request("decided", timedelta(hours=2), status="approved")
    assert sweep().expired_approval_requests == 1
    assert dict(ApprovalRequest.objects.values_list("call_id", "status")) == {
        "stale": "expired",
        "fresh": "pending",
        "decided": "approved",
    }
    event = Event.objects.get(kind="approval.expired")
    assert (event.object_type, event.object_id, event.created_by, event.actor) == (
        "approvalrequest",
        str(stale.pk),
        alice,
        "sweeper",
    )
    assert event.details == {"run_id": "run-1", "tool_name": "shell", "call_id": "stale"}
    assert sweep().expired_approval_requests == 0


def test_the_task_runs_the_sweep_and_returns_its_counts():
    pause("due", due_in=-1)
    assert expire_pauses() == {
        "expired_pauses": 1,
        "expired_approval_requests": 0,
        "purged_pauses": 0,
        "purged_events": 0,
        "purged_threads": 0,
        "purged_store_items": 0,
    }
    assert expire_pauses.name == "agentstate.tasks.expire_pauses"


def test_the_management_command_prints_progress_and_counts():
    for i in range(5):
        pause(f"due-{i}", due_in=-1)
    out = StringIO()
    call_command("agentstate_expire", "--batch-size", "2", verbosity=2, stdout=out)
    text = out.getvalue()
    assert "expired pauses: 2 so far" in text and "expired pauses: 4 so far" in text
    assert "expired pauses: 5\nexpired approval requests: 0\npurged pauses: 0" in text
    out = StringIO()
    call_command("agentstate_expire", stdout=out)
    assert out.getvalue().startswith("expired pauses: 0\n") and "so far" not in out.getvalue()


def test_the_management_command_refuses_a_bad_batch_size():
    with pytest.raises(CommandError):
        call_command("agentstate_expire", "--batch-size", "0")


@pytest.mark.django_db(transaction=True)
def test_two_sweeps_at_once_expire_each_pause_once(concurrently):
    PausedRun.objects.bulk_create(
        PausedRun(
            chat_id="chat",
            tool_call_id=f"due-{i}",
            owner="alice",
            expires_at=timezone.now() - timedelta(seconds=1),
        )
        for i in range(500)
    )
    results = concurrently(2, lambda i: sweep(batch_size=50))
    assert sum(r.expired_pauses for r in results) == 500, results
    assert set(statuses().values()) == {"expired"}
    assert Event.objects.filter(kind="pause.expired").count() == 500
    assert Event.objects.filter(kind="pause.expired").values("object_id").distinct().count() == 500


def test_the_sweep_agrees_with_claims_refused_before_it():
    question = pauses.put("chat", "call", "alice", None)
    PausedRun.objects.update(expires_at=Now() - timedelta(seconds=1))
    with pytest.raises(Exception) as refused:
        pauses.claim("chat", "call", "alice", question)
    assert refused.value.code == "expired"
    sweep()
    assert statuses() == {"call": "expired"}
