"""The LangGraph saver smaller and faster: a task's writes no longer lock the
thread's row, the read of a checkpoint looks up only the channels whose value
is not in the checkpoint's JSON, and the hot path's functions keep one plan
per statement (``sql/0005_saver.sql``)."""

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0003_webhooks_policies_langgraph"),
    ]

    operations = [
        RunSQLFile("0005_saver.sql", "0005_saver.reverse.sql"),
    ]
