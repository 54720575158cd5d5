# A LangGraph checkpoint's put also stores the task writes to its parent that came
# after the parent's put had begun (PostgreSQL): one round trip and one commit fewer
# for each such call.

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0022_listening"),
    ]

    operations = [
        RunSQLFile("0023_parent_writes.sql", "0023_parent_writes.reverse.sql"),
    ]
