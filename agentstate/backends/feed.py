"""The event feed's one rule per database: which events may be handed out.

An id is drawn when an event row is inserted, before its transaction
commits, so transactions can commit out of id order: a follower that has
seen id 12 must not be handed 12 while 11 is still in flight, or it would
skip 11 for ever. ``settled`` is a condition on the event id, to filter the
page read next: the events below the first id that a transaction still in
flight might hold.

- PostgreSQL: before a transaction draws its first event id, it reads the
  sequence's last value V and takes a shared advisory lock keyed by V, held
  until it ends; its ids are all above V (a trigger, ``sql/05_feed.sql``).
  ``agentstate_feed_bound()`` reads the sequence, then the locks held: no id
  below the least of the last value and every V held + 1 can still appear.
  That statement runs before the page's, so the page's snapshot is later.
- SQLite: one writer at a time, from its first write to its commit, so ids
  commit in order: every visible event is settled.
- MySQL and MariaDB: an event is settled when it was created more than a
  second before the start of every other InnoDB transaction in flight
  (``information_schema.innodb_trx``); with none in flight, at once.
- Any other database: every visible event (as on SQLite).
"""

from django.db import connections
from django.db.models import Q
from django.db.models.expressions import RawSQL

from agentstate.models import Event

MAX_ID = 2**63 - 1

_UNSETTLED = {
    "mysql": "{table}.created_at >= (SELECT min(trx_started) - INTERVAL 1 SECOND"
    " FROM information_schema.innodb_trx WHERE trx_mysql_thread_id <> CONNECTION_ID())",
}


def postgresql_bound(alias: str = "default") -> int:
    """On PostgreSQL, the first event id a transaction still in flight might hold
    (``agentstate_feed_bound()``): every id below it is settled."""
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT agentstate_feed_bound()")
        (bound,) = cursor.fetchone()
    return int(bound)


def settled(after: int, alias: str = "default") -> Q:
    """The events above ``after`` that may be handed out (see the module's docstring),
    for the query that follows (PostgreSQL asks the database here, first)."""
    vendor = connections[alias].vendor
    if vendor == "postgresql":
        return Q(pk__gt=after, pk__lt=postgresql_bound(alias))
    unsettled = _UNSETTLED.get(vendor)
    if unsettled is None:
        return Q(pk__gt=after)
    table = connections[alias].ops.quote_name(Event._meta.db_table)
    bound = RawSQL(
        f"coalesce((SELECT min(f.id) FROM {table} f WHERE f.id > %s AND "  # noqa: S608
        + unsettled.format(table="f")
        + f"), {MAX_ID})",
        (after,),
    )
    return Q(pk__gt=after, pk__lt=bound)
