# An event's NOTIFY only while some process listens (PostgreSQL): a transaction
# that sent one holds a lock of the whole cluster through its commit.

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0021_key_plans"),
    ]

    operations = [
        RunSQLFile("0022_listening.sql", "0022_listening.reverse.sql"),
    ]
