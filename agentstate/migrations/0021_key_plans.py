# Every operation's PL/pgSQL function (PostgreSQL) plans its statements without
# sequential scans: a plan made while a table was empty would scan it for as long
# as the connection keeps the plan.

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0020_request_answers"),
    ]

    operations = [
        RunSQLFile("0021_key_plans.sql", "0021_key_plans.reverse.sql"),
    ]
