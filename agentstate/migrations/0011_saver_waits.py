# A LangGraph task's writes that arrive while the put of their checkpoint is under
# way wait for that put alone, holding nothing, so that the thread's next put never
# waits for them (agentstate_put_lock).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0010_checkpoint_chains"),
    ]

    operations = [
        RunSQLFile("0011_saver_waits.sql", "0011_saver_waits.reverse.sql"),
    ]
