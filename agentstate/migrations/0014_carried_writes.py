# A checkpoint's put stores the task writes to it that came to the saver before it,
# which then need no call of their own.

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0013_rest_speed"),
    ]

    operations = [
        RunSQLFile("0014_carried_writes.sql", "0014_carried_writes.reverse.sql"),
    ]
