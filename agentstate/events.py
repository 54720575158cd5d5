"""Writing the event log and sending its signals: the one place for both.

``record()`` must be called inside the transaction of the change it records;
the row commits or rolls back with it, and the signals go out on commit.
"""

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import connection, models, transaction

from agentstate import signals
from agentstate.db import M, prepared, returned
from agentstate.db import from_json as from_json_row
from agentstate.models import Event

if TYPE_CHECKING:
    from agentstate.backends.base import Actor


def actor_name(user: Any = None, actor: str | None = None) -> str:
    """Who made a change: an explicit principal, else the user's username."""
    if actor:
        return actor
    if user is not None and getattr(user, "is_authenticated", False):
        return str(user.get_username())
    return ""


def _send_on_commit(events: list[Event], sender: type, instance: Any) -> None:
    def send() -> None:
        for event in events:
            kind_signal = signals.BY_KIND.get(event.kind)
            if kind_signal is not None:
                kind_signal.send(sender=sender, event=event, instance=instance)
            signals.event_recorded.send(sender=sender, event=event, instance=instance)

    transaction.on_commit(send)


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


def _fields(
    kind: str,
    model: type[models.Model],
    object_id: str,
    user: Any,
    actor: str | None,
    owner: str,
    details: dict | None,
) -> dict[str, Any]:
    """An event's fields but ``created_by`` (the object's creator) and ``created_at``."""
    return {
        "kind": kind,
        "actor": actor_name(user, actor),
        "user_id": user.pk if getattr(user, "is_authenticated", False) else None,
        "object_type": model._meta.model_name,
        "object_id": object_id,
        "owner": owner,
        "details": details or {},
    }


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
    fields = _fields(kind, type(instance), object_id, user, actor, owner, details)
    fields["created_by_id"] = getattr(instance, "created_by_id", None)
    columns, values = prepared(Event, fields)
    # One fixed INSERT: an ORM create costs more in Python than the statement.
    (event,) = returned(
        Event,
        f"INSERT INTO {Event._meta.db_table} ({', '.join(columns)})"
        f" VALUES ({', '.join(['%s'] * len(values))}) RETURNING *",
        values,
    )
    _send_on_commit([event], type(instance), instance)
    return event


def change_and_record(
    model: type[M],
    statement: str,
    params: list[Any],
    kind: str,
    *,
    object_id: str,
    user: Any = None,
    actor: str | None = None,
    owner: str = "",
    details: dict | None = None,
    row_details: tuple[str, ...] = (),
) -> M | None:
    """``statement`` and its event in one PostgreSQL statement: atomic without a transaction.

    ``statement`` is one INSERT or UPDATE of ``model`` ending in ``RETURNING
    *``; the event of the row it returns copies that row's ``created_by_id``
    and adds its ``row_details`` columns to ``details`` (those not null). Returns the row, or
    ``None`` (and no event) when the statement changed none; the signals go
    out on commit, like ``record``'s.
    """
    fields = _fields(kind, model, object_id, user, actor, owner, details)
    columns, values = prepared(Event, fields)
    details_sql = "%s"
    if row_details:
        pairs = ", ".join(f"'{c}', changed.{c}" for c in row_details)
        details_sql += f" || jsonb_strip_nulls(jsonb_build_object({pairs}))"
    placeholders = [details_sql if name == "details" else "%s" for name in fields]
    creator = "changed.created_by_id" if _has_field(model, "created_by") else "NULL"
    rows = returned(
        model,
        f"WITH changed AS ({statement}), logged AS (INSERT INTO {Event._meta.db_table}"
        f" ({', '.join(columns)}, {Event._meta.get_field('created_by').column}) SELECT {', '.join(placeholders)}, {creator} FROM changed"
        " RETURNING id, created_at, details)"
        " SELECT changed.*, logged.id AS event_pk, logged.created_at AS event_at,"
        " logged.details AS event_details FROM changed CROSS JOIN logged",
        [*params, *values],
    )
    instance = next(iter(rows), None)
    if instance is not None:
        # the CTE's own columns, set on the instance by ``returned``
        extra: Any = instance
        details = Event._meta.get_field("details").from_db_value(
            extra.event_details,
            None,  # type: ignore[arg-type]  # unused by JSONField
            connection,
        )
        event = Event(
            pk=extra.event_pk,
            created_at=extra.event_at,
            created_by_id=getattr(instance, "created_by_id", None),
            **{**fields, "details": details},
        )
        _send_on_commit([event], model, instance)
    return instance


def _has_field(model: type[models.Model], name: str) -> bool:
    return any(f.name == name for f in model._meta.concrete_fields)


def record_many(kind: str, model: type[models.Model], rows: list[dict[str, Any]]) -> list[Event]:
    """Append one event per row of a bulk change (``rows``: Event field values)."""
    events = Event.objects.bulk_create(
        Event(kind=kind, object_type=model._meta.model_name or "", **row) for row in rows
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


def announce(events: list[Event], sender: type[models.Model], instance: Any = None) -> None:
    """Send the signals of the events a backend wrote, after its transaction commits
    (at once in autocommit). ``instance``: the changed object (``None`` for a bulk
    change, whose events name their objects)."""
    if events:
        _send_on_commit(events, sender, instance)


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
        object_type=model._meta.model_name or "",
        object_id=object_id,
        created_by_id=created_by_id,
        owner=owner,
        details=details or {},
    )


def from_json(rows: list[dict[str, Any]], alias: str = "default") -> list[Event]:
    """Events as a PostgreSQL function answered them (``to_jsonb`` of the rows)."""
    return [from_json_row(Event, row, alias) for row in rows]
