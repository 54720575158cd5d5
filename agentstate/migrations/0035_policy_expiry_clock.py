# A policy's expiry taken and checked by the database's clock (PostgreSQL).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0034_deadline_after_locks"),
    ]

    operations = [
        RunSQLFile("0035_policy_expiry_clock.sql", "0035_policy_expiry_clock.reverse.sql"),
    ]
