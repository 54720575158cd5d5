# Reads by their keys where an OR hid a key from the plan (PostgreSQL).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0031_linear_batches"),
    ]

    operations = [
        RunSQLFile("0032_keyed_reads.sql", "0032_keyed_reads.reverse.sql"),
    ]
