"""Exactly-once claims under real concurrency: threads with their own connections."""

import random
import time
from datetime import timedelta

import pytest
from django.db.models.functions import Now

from agentstate.exceptions import AlreadyClaimed, PauseExpired
from agentstate.models import Event, PausedRun
from agentstate.services import pauses
from agentstate.services.sweep import sweep

pytestmark = pytest.mark.django_db(transaction=True)


def test_fifty_threads_claiming_one_pause_exactly_one_wins(concurrently):
    question = pauses.put("chat", "call", "alice", {"resume": True})

    results = concurrently(
        50, lambda i: pauses.claim("chat", "call", "alice", question, by=f"worker-{i}")
    )

    winners = [r for r in results if r == {"resume": True}]
    refusals = [r for r in results if isinstance(r, AlreadyClaimed)]
    others = [r for r in results if r != {"resume": True} and not isinstance(r, AlreadyClaimed)]
    assert (len(winners), len(refusals), others) == (1, 49, [])
    pause = PausedRun.objects.get()
    assert pause.status == "claimed" and pause.claimed_by.startswith("worker-")
    assert Event.objects.filter(kind="pause.claimed").count() == 1


def test_fifty_threads_re_pausing_one_call_leave_one_pending_pause(concurrently):
    questions = concurrently(50, lambda i: pauses.put("chat", "call", "alice", {"i": i}))
    assert all(isinstance(q, str) for q in questions), questions
    pause = PausedRun.objects.get()
    assert pause.status == "pending" and str(pause.question_id) in questions
    replaced = [e.details.get("replaced") for e in Event.objects.filter(kind="pause.created")]
    assert sorted(replaced, key=str) == [None] + ["pending"] * 49


def test_claim_racing_the_sweeper_is_claimed_or_expired_never_both(concurrently):
    """100 rounds: a claim and a sweep start together around the expiry instant."""
    rng = random.Random(1234)
    outcomes = {"claimed": 0, "expired": 0}
    for round_ in range(100):
        call = f"call-{round_}"
        question = pauses.put("chat", call, "alice", round_, ttl=3600)
        # Due now, a little before, or a little after: both orders happen.
        offset = rng.choice([-0.05, -0.005, 0, 0.005, 0.02, 60])
        PausedRun.objects.filter(tool_call_id=call).update(
            expires_at=Now() + timedelta(seconds=offset)
        )

        def race(i: int, call: str = call, question: str = question):
            if i == 0:
                return pauses.claim("chat", call, "alice", question)
            time.sleep(rng.random() * 0.01)
            return sweep()

        claim_result, sweep_result = concurrently(2, race)
        assert not isinstance(sweep_result, BaseException), sweep_result
        sweep()  # whatever is still due is swept now
        pause = PausedRun.objects.get(tool_call_id=call)
        expired_events = Event.objects.filter(
            kind="pause.expired", object_id=f"chat#{call}"
        ).count()
        if isinstance(claim_result, BaseException):
            assert isinstance(claim_result, PauseExpired), claim_result
            assert (pause.status, pause.claimed_at, expired_events) == ("expired", None, 1)
            outcomes["expired"] += 1
        else:
            assert claim_result == round_
            assert (pause.status, expired_events) == ("claimed", 0)
            outcomes["claimed"] += 1
    print(f"claim vs sweep, 100 rounds: {outcomes}")
    assert sum(outcomes.values()) == 100
