# A request filed already decided (by an active policy or the run's records) records
# approval.decided, its actor the policy ("policy:ID") or the records ("records"), and
# approval.requested holds the arguments as filed whether or not a rule covers the tool
# (PostgreSQL; the portable backend writes the same events).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0025_budget_set"),
    ]

    operations = [
        RunSQLFile("0026_decided_at_filing.sql", "0026_decided_at_filing.reverse.sql"),
    ]
