"""The LangGraph saver smaller and faster, and the sweep of pauses linear.

A task's writes no longer lock the thread's row, the read of a checkpoint
looks up only the channels whose value is not in the checkpoint's JSON, the
hot path's functions keep one plan per statement, and a DeltaChannel's
history is one call; the sweep's batches of expired pauses go by expiry then
id, each from where the last ended, on an index of both
(``sql/0006_saver_sweep.sql``). The checkpoint tables' keys to their thread
are no longer checked by the database (the saver writes them with the
thread's row), so that a row written no longer locks the thread's.
"""

import django.db.models.deletion
from django.db import migrations, models

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0005_mysql_exact_collations"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="pausedrun",
            name="agentstate_pause_sweep",
        ),
        migrations.AddIndex(
            model_name="pausedrun",
            index=models.Index(
                condition=models.Q(("status", "pending")),
                fields=["expires_at", "id"],
                name="agentstate_pause_sweep",
            ),
        ),
        migrations.AlterField(
            model_name="checkpoint",
            name="thread",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="checkpoints",
                to="agentstate.thread",
                verbose_name="thread",
            ),
        ),
        migrations.AlterField(
            model_name="checkpointblob",
            name="thread",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="blobs",
                to="agentstate.thread",
                verbose_name="thread",
            ),
        ),
        migrations.AlterField(
            model_name="checkpointwrite",
            name="thread",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="writes",
                to="agentstate.thread",
                verbose_name="thread",
            ),
        ),
        RunSQLFile("0006_saver_sweep.sql", "0006_saver_sweep.reverse.sql"),
    ]
