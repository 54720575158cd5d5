"""The outbox seen from the writes: each event a filing or a decision appends comes
with the ids of its own webhook deliveries, one per active webhook that wants its
kind, and none without such a webhook (on PostgreSQL the functions insert their
events themselves and the outbox trigger starts no insert without an active one)."""

from datetime import timedelta

import pytest
from django.db import transaction

from agentstate.backends import backend
from agentstate.models import Delivery, Run, Webhook
from agentstate.types import Actor

pytestmark = pytest.mark.django_db

TTL = timedelta(days=1)


def _hook(kinds: list[str], active: bool = True) -> Webhook:
    return Webhook.objects.create(
        url="https://example.com/hook", secret="whsec_x", kinds=kinds, active=active
    )


def _file_and_decide(call_id: str) -> list:
    run, _ = Run.objects.get_or_create(run_id="run-outbox")
    by = Actor(None, "tester")
    filed = backend().request_approval("run-outbox", "mail", call_id, {"to": "a"}, TTL, None, by)
    (request, created) = filed.value
    assert created and run.pk == request.run_id
    decided = backend().decide(request.pk, True, False, "fine", None, TTL, by)
    return [*filed.events, *decided.events]


def _delivered(event) -> list[int]:
    return sorted(Delivery.objects.filter(event_id=event.pk).values_list("pk", flat=True))


def test_without_an_active_webhook_the_events_have_no_delivery():
    _hook([], active=False)
    written = _file_and_decide("c1")
    assert [e.kind for e in written] == [
        "approval.requested",
        "approvals.changed",
        "approval.decided",
    ]
    assert written[0].pk < written[1].pk < written[2].pk
    assert all(e.delivery_ids == [] for e in written)
    assert not Delivery.objects.exists()


def test_each_event_comes_with_the_deliveries_of_the_webhooks_that_want_it():
    every = _hook([])
    decided_only = _hook(["approval.decided"])
    _hook([], active=False)
    written = _file_and_decide("c2")
    for event in written:
        assert sorted(event.delivery_ids) == _delivered(event)
        wanted = {every.pk} | ({decided_only.pk} if event.kind == "approval.decided" else set())
        assert (
            set(Delivery.objects.filter(event_id=event.pk).values_list("webhook_id", flat=True))
            == wanted
        )


def test_the_deliveries_are_read_back_after_a_savepoint_that_wrote_some_was_undone():
    """On PostgreSQL an event's deliveries are read back only where the outbox wrote
    some in the transaction (its mark, undone with its savepoint): a filing rolled
    back to its savepoint leaves no mark, and the next one's deliveries still come."""
    every = _hook([])
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        assert [len(e.delivery_ids) for e in _file_and_decide("c3")] == [1, 1, 1]
        raise ZeroDivisionError
    assert not Delivery.objects.exists()
    written = _file_and_decide("c4")
    assert [len(e.delivery_ids) for e in written] == [1, 1, 1]
    for event in written:
        assert event.delivery_ids == _delivered(event)
        assert Delivery.objects.get(pk=event.delivery_ids[0]).webhook_id == every.pk
    every.active = False
    every.save()
    assert all(e.delivery_ids == [] for e in _file_and_decide("c5"))
