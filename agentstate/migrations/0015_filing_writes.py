# The writes' server work: the event table's NOTIFY sent by its row trigger, a
# filing's record read only when needed, CHECK constraints with their lists stored
# as constants (PostgreSQL), and the decider's index only over decided requests.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0014_carried_writes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="approvalrequest",
            name="decided_by",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
                verbose_name="decided by",
            ),
        ),
        migrations.AddIndex(
            model_name="approvalrequest",
            index=models.Index(
                condition=models.Q(("decided_by__isnull", False)),
                fields=["decided_by"],
                name="agentstate_request_decider",
            ),
        ),
        RunSQLFile("0015_filing_writes.sql", "0015_filing_writes.reverse.sql"),
    ]
