"""Writing the event log and sending its signals: the one place for both.

``record()`` must be called inside the transaction of the change it records;
the row commits or rolls back with it, and the signals go out on commit.
"""

from typing import Any

from django.db import models, transaction

from agentstate import signals
from agentstate.models import Event


def actor_name(user: Any = None, actor: str | None = None) -> str:
    """Who made a change: an explicit principal, else the user's username."""
    if actor:
        return actor
    if user is not None and getattr(user, "is_authenticated", False):
        return user.get_username()
    return ""


def _send_on_commit(events: list[Event], sender: type, instance: Any) -> None:
    def send() -> None:
        for event in events:
            kind_signal = signals.BY_KIND.get(event.kind)
            if kind_signal is not None:
                kind_signal.send(sender=sender, event=event, instance=instance)
            signals.event_recorded.send(sender=sender, event=event, instance=instance)

    transaction.on_commit(send)


def record(
    kind: str,
    instance: models.Model,
    *,
    object_id: str,
    user: Any = None,
    actor: str | None = None,
    owner: str = "",
    details: dict | None = None,
) -> Event:
    """Append one event about ``instance`` and send its signals after commit."""
    event = Event.objects.create(
        kind=kind,
        actor=actor_name(user, actor),
        user=user if getattr(user, "is_authenticated", False) else None,
        object_type=instance._meta.model_name,
        object_id=object_id,
        created_by_id=getattr(instance, "created_by_id", None),
        owner=owner,
        details=details or {},
    )
    _send_on_commit([event], type(instance), instance)
    return event


def record_many(kind: str, model: type[models.Model], rows: list[dict[str, Any]]) -> list[Event]:
    """Append one event per row of a bulk change (``rows``: Event field values)."""
    events = Event.objects.bulk_create(
        Event(kind=kind, object_type=model._meta.model_name, **row) for row in rows
    )
    _send_on_commit(events, model, None)
    return events


def listened(kind: str, sender: type) -> bool:
    """Whether a receiver waits for events of ``kind`` from ``sender``.

    A bulk writer that inserts its events in SQL builds the ``Event`` objects
    for the signals (``announce``) only then.
    """
    kind_signal = signals.BY_KIND.get(kind)
    return signals.event_recorded.has_listeners(sender) or (
        kind_signal is not None and kind_signal.has_listeners(sender)
    )


def announce(events: list[Event], model: type[models.Model]) -> None:
    """Send the signals of events written without ``record``, after commit."""
    _send_on_commit(events, model, None)
