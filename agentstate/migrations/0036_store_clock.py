# The LangGraph store's times by the database's clock (PostgreSQL).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0035_policy_expiry_clock"),
    ]

    operations = [
        RunSQLFile("0036_store_clock.sql", "0036_store_clock.reverse.sql"),
    ]
