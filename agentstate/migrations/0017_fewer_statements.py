# Fewer statements in the writes' functions (PostgreSQL): the event trigger's steps
# as simple expressions, the outbox's insert only with an active webhook, a filing's
# reads in one statement, four CHECK constraints in a shorter, equal form.

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0016_token_lookup"),
    ]

    operations = [
        RunSQLFile("0017_fewer_statements.sql", "0017_fewer_statements.reverse.sql"),
    ]
