# A LangGraph checkpoint's row holds a bounded size of pending writes (PostgreSQL).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0032_keyed_reads"),
    ]

    operations = [
        RunSQLFile("0033_held_writes.sql", "0033_held_writes.reverse.sql"),
    ]
