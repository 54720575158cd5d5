# The writes' server work: the event table's NOTIFY sent by its row trigger, a
# filing's record read only when needed, CHECK constraints with their lists stored
# as constants (PostgreSQL).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0014_carried_writes"),
    ]

    operations = [
        RunSQLFile("0015_filing_writes.sql", "0015_filing_writes.reverse.sql"),
    ]
