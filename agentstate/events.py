"""The event log's announce side: what the services send once a change commits.

A backend writes an operation's events, and their webhook deliveries, in the
operation's own transaction (``agentstate.backends.events``). The services then
``announce`` them: the signals of the events, and ``deliveries_written`` with
the deliveries' ids, go out after the commit.
"""

import logging
from typing import Any

from django.db import models, transaction

from agentstate import signals
from agentstate.models import Delivery, Event

logger = logging.getLogger(__name__)


def _send_on_commit(events: list[Event], sender: type, instance: Any) -> None:
    def send() -> None:
        for event in events:
            kind_signal = signals.BY_KIND.get(event.kind)
            if kind_signal is not None:
                kind_signal.send(sender=sender, event=event, instance=instance)
            signals.event_recorded.send(sender=sender, event=event, instance=instance)

    transaction.on_commit(send)


def heard(kind: str, sender: type[models.Model]) -> bool:
    """Whether ``announce`` of an event of ``kind`` from ``sender`` reaches a receiver:
    otherwise a bulk change need not build its events (the log has them)."""
    kind_signal = signals.BY_KIND.get(kind)
    return signals.event_recorded.has_listeners(sender) or (
        kind_signal is not None and kind_signal.has_listeners(sender)
    )


def announce(events: list[Event], sender: type[models.Model], instance: Any = None) -> None:
    """Send the signals of the events a backend wrote, and hand over the webhook
    deliveries they made, after its transaction commits (at once in autocommit).
    ``instance``: the changed object (``None`` for a bulk change, whose events
    name their objects)."""
    if not events:
        return
    _send_on_commit(events, sender, instance)
    deliveries = [pk for event in events for pk in getattr(event, "delivery_ids", ())]
    if deliveries:
        transaction.on_commit(lambda: _hand_over(deliveries))


def _hand_over(deliveries: list[int]) -> None:
    """Send ``deliveries_written``: with Celery its receiver (``agentstate.tasks``) hands
    the deliveries to the broker; without it (or without a broker) the beat task or
    ``manage.py agentstate_expire`` sends them, as it sends whatever is left behind."""
    answers = signals.deliveries_written.send_robust(sender=Delivery, delivery_ids=deliveries)
    for _, answer in answers:
        if isinstance(answer, Exception):
            # the outbox keeps them; never fail a committed change
            logger.warning("could not queue webhook deliveries %s", deliveries, exc_info=answer)
