"""Reading a fixed statement's rows as Django reads them, at C speed."""

from typing import Any

from agentstate.db import cursor


def reading_cursor(connection: Any) -> Any:
    """``db.cursor(connection)``, whose ``timestamptz`` columns psycopg's own loader
    reads (its C one, with ``psycopg[binary]``) wherever it gives what Django's does.

    Django reads them through a loader of its own, a subclass of psycopg's pure
    Python one that sets Django's time zone on each time: a few µs a time, most of
    reading a page (20 pauses: 147 µs so, 12 µs by psycopg's C loader, on the
    bench's machine). psycopg's loader gives each time in the session's
    ``TimeZone``, Django's the same time with ``connection.timezone``: where both
    are the same zone (with ``USE_TZ``, Django sets the session's zone to it), the
    values are the same, ``tzinfo`` included; elsewhere (no ``USE_TZ``: naive times)
    Django's loader is kept.
    """
    c = cursor(connection)
    raw = c.cursor
    adapters = getattr(raw, "adapters", None)  # psycopg 3
    if adapters is not None:
        from psycopg.postgres import types
        from psycopg.pq import Format
        from psycopg.types.datetime import TimestamptzLoader

        django_loader = adapters.get_loader(types["timestamptz"].oid, Format.TEXT)
        zone = getattr(django_loader, "timezone", None)  # Django's BaseTzLoader's
        if zone is not None and zone == raw.connection.info.timezone:
            adapters.register_loader("timestamptz", TimestamptzLoader)
    return c
