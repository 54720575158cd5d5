"""The event log's write side: what a backend writes in an operation's own transaction.

An operation's events commit or roll back with its change. The ORM backend
builds them with ``new`` and writes them with ``save``, which writes their
webhook deliveries too (the outbox); the PostgreSQL backend's functions write
both (``agentstate_record``) and answer the rows, which ``from_json`` reads
back. The services then announce them after the commit
(``agentstate.events.announce``): that side is theirs, never a backend's.
"""

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, cast

from django.db import connections, models

from agentstate.db import from_json as from_json_row
from agentstate.models import Delivery, Event, Webhook
from agentstate.types import Actor


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


def save(alias: str, events: Iterable[Event]) -> list[Event]:
    """Save events in the caller's transaction, with their webhook deliveries (the
    outbox), each event's delivery ids in ``event.delivery_ids``: what the ORM backends
    write events with."""
    saved = Event.objects.using(alias).bulk_create(list(events))
    outbox(saved, alias)
    return saved


def outbox(events: list[Event], alias: str) -> list[int]:
    """The webhook deliveries of ``events`` (saved, in the caller's transaction): their
    ids, each event's also in ``event.delivery_ids``.

    Every active webhook that wants an event's kind (or every kind) gets one. On
    PostgreSQL the outbox trigger of the event table has written them (whoever
    inserted the events, the ORM backend too) and they are only read here; elsewhere
    they are written here.
    """
    if connections[alias].vendor == "postgresql":
        saved = list(
            Delivery.objects.using(alias).filter(event__in=events).values_list("pk", "event_id")
        )
    else:
        active = list(Webhook.objects.using(alias).filter(active=True).values_list("pk", "kinds"))
        rows = [
            Delivery(webhook_id=pk, event=event)
            for event in events
            for pk, kinds in active
            if not kinds or event.kind in kinds
        ]
        created = Delivery.objects.using(alias).bulk_create(rows) if rows else []
        saved = [(row.pk, row.event_id) for row in created]
    delivered: dict[int, list[int]] = {}
    for pk, event_id in saved:
        delivered.setdefault(event_id, []).append(pk)
    for event in events:
        event.delivery_ids = delivered.get(event.pk, [])
    return [pk for pk, _ in saved]


def new(
    kind: str,
    model: type[models.Model],
    object_id: str,
    by: Actor,
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
    """Events as a PostgreSQL function answered them (``to_jsonb`` of the rows; keys
    that are no column, ``delivery_ids``, become attributes), each built by
    ``agentstate.db.from_json``: the time the only value converted, no model signal
    sent unless one is listened to, so that a sweep's batch of a thousand events
    costs its receivers' work, not a model's ``from_db`` each. ``agentstate_record``
    leaves ``delivery_ids`` out where no delivery was written: none."""
    events = [from_json_row(Event, row, alias) for row in rows]
    for event, row in zip(events, rows, strict=True):
        if "delivery_ids" not in row:
            event.delivery_ids = []
    return events
