# A LangGraph checkpoint's put in fewer statements (PostgreSQL): the put lock taken in
# an assignment, the thread's row made or locked in the put itself, one SELECT for the
# sibling, the base and the early writes, the early writes' DELETE only when some
# wait, an insert that does nothing on a conflict (and an update then).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0018_pages"),
    ]

    operations = [
        RunSQLFile("0019_checkpoint_put.sql", "0019_checkpoint_put.reverse.sql"),
    ]
