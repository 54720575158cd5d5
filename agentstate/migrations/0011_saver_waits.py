# A LangGraph task's writes that arrive while the put of their checkpoint is under
# way wait for that put alone, holding nothing, so that the thread's next put never
# waits for them (agentstate_put_lock); they go to the database once. The index of
# a checkpoint's children covers the checkpoints with a parent only, so that no
# lookup by checkpoint id can scan a thread through it.

import agentstate.fields
from django.db import migrations, models

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0010_checkpoint_chains"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="checkpoint",
            name="agentstate_checkpoint_parent",
        ),
        migrations.AddIndex(
            model_name="checkpoint",
            index=agentstate.fields.TextPrefixIndex(
                condition=models.Q(("parent_checkpoint_id__isnull", False)),
                fields=["thread", "checkpoint_ns", "parent_checkpoint_id"],
                name="agentstate_checkpoint_parent",
            ),
        ),
        RunSQLFile("0011_saver_waits.sql", "0011_saver_waits.reverse.sql"),
    ]
