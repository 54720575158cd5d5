# A decision's deadline read once its locks are held (PostgreSQL).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0033_held_writes"),
    ]

    operations = [
        RunSQLFile("0034_deadline_after_locks.sql", "0034_deadline_after_locks.reverse.sql"),
    ]
