"""Who made a change: ``by=`` in every service, the old keywords deprecated."""

import pytest
from asgiref.sync import async_to_sync

from agentstate.models import Event, Variable
from agentstate.services import context, pauses, runs

pytestmark = pytest.mark.django_db


def test_by_takes_a_user_or_a_name(alice):
    run = runs.create_run("r")
    runs.approve(run, "mail", "c1", by=alice)
    pauses.put("chat", "call", "alice", 1, by="agent-7")
    context.put("s", "x", 1, by=alice)
    assert Event.objects.get(kind="approvals.changed").actor == "alice"
    pause_event = Event.objects.get(kind="pause.created")
    assert (pause_event.actor, pause_event.user_id) == ("agent-7", None)
    assert Variable.objects.get(name="x").updated_by == "alice"


@pytest.mark.parametrize(
    ("call", "old"),
    [
        (lambda user: runs.approve(runs.create_run("r"), "mail", "c1", user=user), "user="),
        (lambda user: context.push("s", "x", 1, actor="conv"), "actor="),
        (lambda user: pauses.put("chat", "call", "alice", 1, user=user), "user="),
    ],
)
def test_the_old_keywords_warn_and_still_work(alice, call, old):
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated"):
        call(alice)
    assert Event.objects.exists() or Variable.objects.get(name="x").updated_by == "conv"


def test_user_and_actor_together_are_that_user_under_that_name(alice):
    with pytest.warns(DeprecationWarning, match="user=, actor= is deprecated"):
        pauses.put("chat", "call", "alice", 1, user=alice, actor="agent-7")
    event = Event.objects.get(kind="pause.created")
    assert (event.actor, event.user_id) == ("agent-7", alice.pk)


def test_by_and_an_old_keyword_together_are_refused(alice):
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="by= and user="):
        runs.approve(runs.create_run("r"), "mail", "c1", by=alice, user=alice)


def test_the_async_forms_take_the_same_keywords():
    with pytest.warns(DeprecationWarning, match="actor= is deprecated"):
        async_to_sync(context.aput)("s", "x", 1, actor="conv")
    async_to_sync(context.apush)("s", "y", 1, by="conv")
    assert set(Variable.objects.values_list("updated_by", flat=True)) == {"conv"}
