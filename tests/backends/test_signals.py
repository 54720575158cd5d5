"""Every audited change sends its signal once, after commit, and a rolled
back or refused change sends nothing.

``SCENARIOS`` holds, per event kind, a setup and the one change that should
be recorded; a kind of ``signals.BY_KIND`` without a scenario fails
``test_every_kind_has_a_scenario``.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models.functions import Now

from agentstate import signals
from agentstate.exceptions import AlreadyClaimed
from agentstate.models import (
    ApprovalPolicy,
    ApprovalRecord,
    ApprovalRequest,
    ApprovalRule,
    Budget,
    Event,
    PausedRun,
    Run,
)
from agentstate.services import approvals, budgets, pauses, runs, sweep

Change = Callable[[], object]


def _pause(user) -> str:
    return pauses.put("chat", "call", "alice", {"step": 1}, by=user)


def created(user) -> Change:
    return lambda: pauses.put("chat", "call", "alice", {"step": 1}, by=user)


def claimed(user) -> Change:
    question = _pause(user)
    return lambda: pauses.claim("chat", "call", "alice", question, by=user)


def resolved(user) -> Change:
    pauses.claim("chat", "call", "alice", _pause(user), by=user)
    return lambda: pauses.resolve("chat", "call", by=user)


def cancelled(user) -> Change:
    _pause(user)
    return lambda: pauses.cancel("chat", "call", by=user)


def expired(user) -> Change:
    _pause(user)
    PausedRun.objects.update(expires_at=Now() - timedelta(hours=1))
    return sweep.sweep


def _run(user) -> Run:
    return runs.create_run("run-1", user=user)


def _request(user) -> ApprovalRequest:
    return approvals.request_approval(_run(user), "tool", "call-1", {"x": 1}, by=user)


def requested(user) -> Change:
    run = _run(user)
    return lambda: approvals.request_approval(run, "tool", "call-1", {"x": 1}, by=user)


def decided(user) -> Change:
    request = _request(user)
    return lambda: approvals.decide(request, "approve", by=user, reason="fine")


def request_expired(user) -> Change:
    _request(user)
    ApprovalRequest.objects.update(created_at=Now() - timedelta(days=30))
    return sweep.sweep


def records_changed(user) -> Change:
    run = _run(user)
    return lambda: runs.approve(run, "tool", "call-1", by=user)


def records_rebuilt(user) -> Change:
    run = _run(user)
    return lambda: runs.rebuild_approvals(
        run, {"tool": {"approved": True, "rejected": []}}, by=user
    )


def budget_set(user) -> Change:
    run = _run(user)
    return lambda: budgets.set_run_budget(run, {"total_tokens": 100}, by=user)


def policy_created(user) -> Change:
    return lambda: approvals.create_policy("tool", "approve", user=user, by=user, reason="fine")


def policy_revoked(user) -> Change:
    policy = approvals.create_policy("tool", "reject", by=user)
    return lambda: approvals.revoke_policy(policy, by=user)


def _rule(**values) -> None:
    from agentstate.services import oversight

    RULES.append(oversight.create_rule("tool", **values).pk)


RULES: list[int] = []


def voted(user) -> Change:
    _rule(approvals_required=2, allow_self_approval=True)
    request = _request(user)
    return lambda: approvals.decide(request, "approve", by=user)


def consumed(user) -> Change:
    from agentstate.services import oversight

    request = _request(user)
    approvals.decide(request, "approve", by=user)
    return lambda: oversight.consume("run-1", "tool", "call-1", {"x": 1}, by=user)


def expiring(user) -> Change:
    _rule(deadline=3600, remind_before=900)
    _request(user)
    ApprovalRequest.objects.update(remind_at=Now() - timedelta(seconds=1))
    return sweep.sweep


def escalated(user) -> Change:
    from django.contrib.auth.models import Group

    _rule(escalate_after=60, escalate_to=Group.objects.create(name="leads"))
    _request(user)
    ApprovalRequest.objects.update(escalate_at=Now() - timedelta(seconds=1))
    return sweep.sweep


def rule_created(user) -> Change:
    from agentstate.services import oversight

    return lambda: RULES.append(oversight.create_rule("tool", by=user).pk)


def rule_changed(user) -> Change:
    from agentstate.services import oversight

    _rule()
    return lambda: oversight.change_rule(RULES[-1], approvals_required=2, by=user)


def rule_deleted(user) -> Change:
    from agentstate.services import oversight

    _rule()
    return lambda: oversight.delete_rule(RULES[-1], by=user)


def the_rule() -> str:
    return str(RULES[-1])


def the_policy() -> str:
    return str(ApprovalPolicy.objects.get().pk)


def the_request() -> str:
    return str(ApprovalRequest.objects.get().pk)


@dataclass(frozen=True)
class Scenario:
    setup: Callable[..., Change]
    model: type
    object_id: Callable[[], str]
    also: tuple[str, ...] = ()  # kinds the same change records before its own


def the_pause() -> str:
    return pauses.object_id("chat", "call")


SCENARIOS: dict[str, Scenario] = {
    "pause.created": Scenario(created, PausedRun, the_pause),
    "pause.claimed": Scenario(claimed, PausedRun, the_pause),
    "pause.resolved": Scenario(resolved, PausedRun, the_pause),
    "pause.cancelled": Scenario(cancelled, PausedRun, the_pause),
    "pause.expired": Scenario(expired, PausedRun, the_pause),
    "approval.requested": Scenario(requested, ApprovalRequest, the_request),
    # Deciding writes the run's record too, in the same transaction.
    "approval.decided": Scenario(
        decided, ApprovalRequest, the_request, also=("approvals.changed",)
    ),
    "approval.expired": Scenario(request_expired, ApprovalRequest, the_request),
    "approvals.changed": Scenario(records_changed, Run, lambda: "run-1"),
    "approvals.rebuilt": Scenario(records_rebuilt, Run, lambda: "run-1"),
    "budget.set": Scenario(budget_set, Budget, lambda: "run:run-1"),
    "policy.created": Scenario(policy_created, ApprovalPolicy, the_policy),
    "policy.revoked": Scenario(policy_revoked, ApprovalPolicy, the_policy),
    "approval.voted": Scenario(voted, ApprovalRequest, the_request),
    "approval.consumed": Scenario(consumed, ApprovalRequest, the_request),
    "approval.expiring": Scenario(expiring, ApprovalRequest, the_request),
    "approval.escalated": Scenario(escalated, ApprovalRequest, the_request),
    "rule.created": Scenario(rule_created, ApprovalRule, the_rule),
    "rule.changed": Scenario(rule_changed, ApprovalRule, the_rule),
    "rule.deleted": Scenario(rule_deleted, ApprovalRule, the_rule),
}
STATE_MODELS = (PausedRun, Run, ApprovalRequest, ApprovalRecord, Budget, ApprovalPolicy)
KINDS = sorted(SCENARIOS)


class Received(list):
    """(signal name, kind, object_id, sender, in a transaction, event row visible) per signal sent."""


@pytest.fixture
def received():
    log = Received()
    names: dict[int, str] = {}
    for name, sig in vars(signals).items():
        if isinstance(sig, type(signals.event_recorded)):
            names.setdefault(id(sig), name)  # a signal's name, not an alias defined after it

    def receiver(signal, sender, event, instance, **kwargs):
        log.append(
            (
                names[id(signal)],
                event.kind,
                event.object_id,
                sender,
                connection.in_atomic_block,
                Event.objects.filter(pk=event.pk).exists(),
                instance,
            )
        )

    all_signals = set(signals.BY_KIND.values()) | {signals.event_recorded}
    for sig in all_signals:
        sig.connect(receiver, weak=False, dispatch_uid=f"test-{id(sig)}")
    yield log
    for sig in all_signals:
        sig.disconnect(dispatch_uid=f"test-{id(sig)}")


def kind_signal_name(kind: str) -> str:
    return next(name for name, sig in vars(signals).items() if sig is signals.BY_KIND[kind])


def test_every_kind_has_a_scenario():
    """A kind added to ``signals.BY_KIND`` must be given a scenario here."""
    missing = set(signals.BY_KIND) - set(SCENARIOS)
    assert not missing, f"no signal scenario for {sorted(missing)}"


def expected_signals(kind: str) -> list[tuple[str, str]]:
    return [
        pair
        for k in (*SCENARIOS[kind].also, kind)
        for pair in ((kind_signal_name(k), k), ("event_recorded", k))
    ]


def state() -> list:
    return [list(model.objects.values().order_by("pk")) for model in STATE_MODELS]


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS)
def test_signal_waits_for_commit_then_fires_once(
    kind, alice, received, django_capture_on_commit_callbacks
):
    scenario = SCENARIOS[kind]
    with django_capture_on_commit_callbacks(execute=True):
        change = scenario.setup(alice)
    received.clear()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        change()
        assert received == [], "a signal was sent before the transaction committed"
    assert len(callbacks) == 1 + len(scenario.also)
    assert [(r[0], r[1]) for r in received] == expected_signals(kind)
    own = [r for r in received if r[1] == kind]
    assert all(r[3] is scenario.model for r in own)
    assert own[0][2] == scenario.object_id() and own[0][5], (
        "the event row is there when the signal arrives"
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", KINDS)
def test_signal_fires_once_after_a_real_commit(kind, alice, received):
    change = SCENARIOS[kind].setup(alice)
    received.clear()
    change()
    assert [(r[0], r[1]) for r in received] == expected_signals(kind)
    assert not any(r[4] for r in received), "a receiver ran inside the transaction"
    assert all(r[5] for r in received), "the event was not committed when the signal arrived"
    assert Event.objects.filter(kind=kind).count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", KINDS)
def test_rolled_back_change_sends_nothing_and_records_nothing(kind, alice, received):
    change = SCENARIOS[kind].setup(alice)
    before = state()
    events_before = Event.objects.count()
    received.clear()

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        change()
        raise Rollback
    assert received == []
    assert Event.objects.count() == events_before
    assert state() == before


@pytest.mark.django_db(transaction=True)
def test_refused_change_sends_nothing(alice, received):
    question = _pause(alice)
    pauses.claim("chat", "call", "alice", question, by=alice)
    received.clear()
    with pytest.raises(AlreadyClaimed):
        pauses.claim("chat", "call", "alice", question, by=alice)
    assert received == []
    assert Event.objects.filter(kind="pause.claimed").count() == 1


@pytest.mark.django_db(transaction=True)
def test_signals_carry_the_model_the_event_and_the_instance(alice, received):
    question = _pause(alice)
    name, kind, object_id, sender, _in_tx, _visible, instance = received[0]
    assert (name, kind, object_id, sender) == (
        "pause_created",
        "pause.created",
        pauses.object_id("chat", "call"),
        PausedRun,
    )
    assert isinstance(instance, PausedRun) and str(instance.question_id) == question
    received.clear()
    PausedRun.objects.update(expires_at=Now() - timedelta(hours=1))
    sweep.sweep()
    assert [(r[0], r[6]) for r in received] == [("pause_expired", None), ("event_recorded", None)]


@pytest.mark.django_db(transaction=True)
def test_a_bulk_expiry_sends_one_signal_per_pause(alice, received):
    for i in range(3):
        pauses.put("chat", f"call-{i}", "alice", None, by=alice)
    PausedRun.objects.update(expires_at=Now() - timedelta(hours=1))
    received.clear()
    sweep.sweep()
    expired_ids = sorted(r[2] for r in received if r[0] == "pause_expired")
    assert expired_ids == ["chat#call-0", "chat#call-1", "chat#call-2"]


@pytest.mark.django_db(transaction=True)
def test_rest_change_sends_its_signal_once(api, received):
    response = api.post(
        "/api/pauses/",
        {"chat_id": "chat", "tool_call_id": "call", "owner": "alice", "payload": 1},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert [r[0] for r in received] == ["pause_created", "event_recorded"]
    refused = api.post(
        "/api/pauses/",
        {
            "chat_id": "chat",
            "tool_call_id": "call",
            "owner": "alice",
            "payload": 1,
            "status": "claimed",
        },
        format="json",
    )
    assert refused.status_code == 400 and len(received) == 2
