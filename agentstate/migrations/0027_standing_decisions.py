# A standing decision of a tool under an approval rule takes the rule's right: an
# approval written into a run's records, or a policy, only by whom the rule lets
# decide alone; and a policy decides no call its rule keeps from it (PostgreSQL; the
# portable backend checks the same in Python).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0026_decided_at_filing"),
    ]

    operations = [
        RunSQLFile("0027_standing_decisions.sql", "0027_standing_decisions.reverse.sql"),
    ]
