# The REST API's token lookup as a PL/pgSQL function, which keeps its plan
# (PostgreSQL): planning the statement anew cost about four times running it.

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0015_filing_writes"),
    ]

    operations = [
        RunSQLFile("0016_token_lookup.sql", "0016_token_lookup.reverse.sql"),
    ]
