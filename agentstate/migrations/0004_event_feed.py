"""The event feed on PostgreSQL: ``agentstate_event.next_xid`` (not a model field:
written by a trigger when an event's id is drawn, read by ``agentstate.backends.feed``)
and a NOTIFY per event in its own transaction (``sql/0004_event_feed.sql``; nothing
on other databases)."""

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("agentstate", "0003_webhooks_policies_langgraph"),
    ]

    operations = [
        RunSQLFile("0004_event_feed.sql", "0004_event_feed.reverse.sql"),
    ]
