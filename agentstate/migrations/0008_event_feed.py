"""The event feed on PostgreSQL (``sql/0008_event_feed.sql``; nothing on other
databases): a lock per writing transaction, taken before its first event id is
drawn, that ``agentstate.backends.feed`` reads (``agentstate_feed_bound``), and a
NOTIFY per event in its own transaction."""

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("agentstate", "0007_generic_plans"),
    ]

    operations = [
        RunSQLFile("0008_event_feed.sql", "0008_event_feed.reverse.sql"),
    ]
