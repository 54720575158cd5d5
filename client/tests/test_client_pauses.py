"""The REST client's pause calls against a live server: every rule's error mapped."""

from datetime import timedelta

import pytest
from django.db.models.functions import Now

from agentstate.models import PausedRun
from agentstate_client import (
    AlreadyClaimed,
    AlreadyResolved,
    InvalidInput,
    NotClaimed,
    NotPending,
    PauseExpired,
    PauseNotFound,
    PermissionDenied,
    QuestionSuperseded,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_put_list_claim_resolve(ac):
    pause = ac.put_pause("chat", "call-1", "alice", {"step": 3}, ttl_seconds=60)
    assert pause["status"] == "pending" and pause["owner"] == "alice"
    assert {"chat_id", "tool_call_id", "question_id", "expires_at"} <= set(pause)
    listed = ac.list_pauses(status="pending", chat_id="chat")
    assert [(p["tool_call_id"], p["payload"]) for p in listed] == [("call-1", {"step": 3})]
    claimed = ac.claim("chat", "call-1", pause["question_id"])
    assert claimed["status"] == "claimed" and claimed["payload"] == {"step": 3}
    assert ac.resolve("chat", "call-1")["status"] == "resolved"
    assert ac.list_pauses(status="pending") == []


def test_claim_refusals_are_distinct(ac):
    first = ac.put_pause("chat", "c", "alice", None)
    second = ac.put_pause("chat", "c", "alice", None)
    with pytest.raises(QuestionSuperseded) as caught:
        ac.claim("chat", "c", first["question_id"])
    ac.claim("chat", "c", second["question_id"])
    with pytest.raises(AlreadyClaimed) as caught:
        ac.claim("chat", "c", second["question_id"])
    assert (caught.value.status, caught.value.code) == (409, "already_claimed")
    ac.resolve("chat", "c")
    with pytest.raises(AlreadyResolved):
        ac.claim("chat", "c", second["question_id"])
    with pytest.raises(PauseNotFound) as caught:
        ac.claim("chat", "nope", second["question_id"])


def test_claim_after_expiry_is_refused(ac):
    pause = ac.put_pause("chat", "c", "alice", None)
    PausedRun.objects.filter(chat_id="chat").update(expires_at=Now() - timedelta(seconds=1))
    with pytest.raises(PauseExpired) as caught:
        ac.claim("chat", "c", pause["question_id"])
    assert (caught.value.status, caught.value.code) == (410, "expired")


def test_resolve_and_cancel_refusals(ac):
    pause = ac.put_pause("chat", "c", "alice", None)
    with pytest.raises(NotClaimed):
        ac.resolve("chat", "c")
    ac.claim("chat", "c", pause["question_id"])
    with pytest.raises(NotPending):
        ac.cancel("chat", "c")
    ac.put_pause("chat", "d", "alice", None)
    assert ac.cancel("chat", "d") is None
    for call in (lambda: ac.resolve("chat", "d"), lambda: ac.cancel("chat", "d")):
        with pytest.raises(PauseNotFound):
            call()


def test_another_owners_pause_and_bad_input(ac, remote, bob):
    with pytest.raises(PermissionDenied):
        ac.put_pause("chat", "c", "bob", None)
    pause = ac.put_pause("chat", "c", "alice", None)
    with pytest.raises(PauseNotFound):
        remote(bob).claim("chat", "c", pause["question_id"])
    with pytest.raises(InvalidInput) as caught:
        ac.put_pause("chat", "e", "alice", None, ttl_seconds=0)
    assert caught.value.field == "ttl_seconds"
