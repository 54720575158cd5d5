# A LangGraph checkpoint's put in fewer statements (PostgreSQL): the put lock taken in
# an assignment, the thread's row made or locked in the put itself, one SELECT for the
# sibling, the base and the early writes, the early writes' DELETE only when some
# wait, an insert that does nothing on a conflict (and an update then).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0017_fewer_statements"),
    ]

    operations = [
        RunSQLFile("0018_putsrv.sql", "0018_putsrv.reverse.sql"),
    ]
