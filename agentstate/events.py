"""The event log: what the backends write, and the signals sent once it commits.

A backend writes an operation's events in the operation's own transaction
(``new`` and ``save`` on the ORM; ``agentstate_record`` on PostgreSQL, whose
rows ``from_json`` reads back), so they commit or roll back with the change.
The services then ``announce`` them: the signals, and the webhook deliveries
the outbox wrote for them, go out after the commit.
"""

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from django.db import models, transaction

from agentstate import signals
from agentstate.db import from_json as from_json_row
from agentstate.models import Event

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from agentstate.backends.base import Actor


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


def json_time(value: datetime) -> str:
    """A time as event details hold it: ISO 8601 in UTC with the microseconds'
    trailing zeros dropped, PostgreSQL's own JSON form (``to_jsonb``), so that an
    event's time reads the same whether SQL or Python wrote it."""
    text = value.astimezone(UTC).isoformat()  # ...T08:46:54[.828170]+00:00
    if "." not in text:
        return text
    seconds, rest = text.split(".", 1)
    fraction = rest[:6].rstrip("0")
    return f"{seconds}.{fraction}{rest[6:]}" if fraction else f"{seconds}{rest[6:]}"


def announce(events: list[Event], sender: type[models.Model], instance: Any = None) -> None:
    """Send the signals of the events a backend wrote, and queue the webhook
    deliveries they made, after its transaction commits (at once in autocommit).
    ``instance``: the changed object (``None`` for a bulk change, whose events
    name their objects)."""
    if not events:
        return
    _send_on_commit(events, sender, instance)
    deliveries = [pk for event in events for pk in getattr(event, "delivery_ids", ())]
    if deliveries:
        transaction.on_commit(lambda: _queue(deliveries))


def _queue(deliveries: list[int]) -> None:
    """Hand the deliveries to Celery; without it (or without a broker) the beat task
    or ``manage.py agentstate_expire`` sends them, as it sends whatever is left behind."""
    try:
        from agentstate.tasks import queue_deliveries

        queue_deliveries(deliveries)
    except Exception:  # noqa: BLE001 - the outbox keeps them; never fail a committed change
        logger.warning("could not queue webhook deliveries %s", deliveries, exc_info=True)


def save(alias: str, events: Iterable[Event]) -> list[Event]:
    """Save events in the caller's transaction, with their webhook deliveries (the
    outbox), each event's delivery ids in ``event.delivery_ids``: what the ORM backends
    write events with."""
    from agentstate.services.webhooks import outbox

    saved = Event.objects.using(alias).bulk_create(list(events))
    outbox(saved, alias)
    return saved


def new(
    kind: str,
    model: type[models.Model],
    object_id: str,
    by: "Actor",
    *,
    created_by_id: int | None = None,
    owner: str = "",
    details: dict | None = None,
) -> Event:
    """An event about an object of ``model``, for a backend to save in the change's
    transaction."""
    return Event(
        kind=kind,
        actor=by.name,
        user_id=by.user_id,
        object_type=cast(str, model._meta.model_name),  # set for every model class
        object_id=object_id,
        created_by_id=created_by_id,
        owner=owner,
        details=details or {},
    )


def from_json(rows: list[dict[str, Any]], alias: str = "default") -> list[Event]:
    """Events as a PostgreSQL function answered them (``to_jsonb`` of the rows)."""
    return [from_json_row(Event, row, alias) for row in rows]
