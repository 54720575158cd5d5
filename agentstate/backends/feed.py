"""The event feed's one rule per database: which events may be handed out.

An id is drawn when an event row is inserted, before its transaction
commits, so transactions can commit out of id order: a follower that has
seen id 12 must not be handed 12 while 11 is still in flight, or it would
skip 11 for ever. ``settled`` is a condition on the event id, evaluated in
the same statement (and so the same snapshot) as the page it limits: the
events below the first one that a transaction still in flight might precede.

- PostgreSQL: every event row records ``next_xid`` (a trigger sets it when
  the row's id is drawn: the transaction's own xid is assigned first, the id
  drawn next, and ``next_xid`` read last from a fresh snapshot), so every
  transaction that drew a lower id has an xid below it. An event is settled
  once the statement's snapshot has no transaction below ``next_xid`` in
  flight (``pg_snapshot_xmin``). Rows older than the column (NULL) are settled.
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
    "postgresql": "{table}.next_xid > pg_snapshot_xmin(pg_current_snapshot())",
    "mysql": "{table}.created_at >= (SELECT min(trx_started) - INTERVAL 1 SECOND"
    " FROM information_schema.innodb_trx WHERE trx_mysql_thread_id <> CONNECTION_ID())",
}


def settled(after: int, alias: str = "default") -> Q:
    """The events above ``after`` that may be handed out: those below the first
    unsettled one (see the module's docstring), as of the statement's own snapshot."""
    unsettled = _UNSETTLED.get(connections[alias].vendor)
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
