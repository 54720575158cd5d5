# Each batch of the sweep changes its rows by their ids, never by a join that may
# read the whole table, and the store's expired items are found from where the last
# batch ended (PostgreSQL).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0028_expired_pause_resolve"),
    ]

    operations = [
        RunSQLFile("0029_sweep_batches.sql", "0029_sweep_batches.reverse.sql"),
    ]
