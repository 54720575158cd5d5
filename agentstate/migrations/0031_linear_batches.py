# The approval deadlines' batches each from where the last ended, and the answers of
# a batch gathered in an array (PostgreSQL).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0030_rule_updated_clock"),
    ]

    operations = [
        RunSQLFile("0031_linear_batches.sql", "0031_linear_batches.reverse.sql"),
    ]
