# An approval rule's updated_at by the database's clock, as its created_at: each save
# sets it to the database's now() (it was the saving process's clock).

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0029_sweep_batches"),
    ]

    operations = [
        migrations.AlterField(
            model_name="approvalrule",
            name="updated_at",
            field=models.DateTimeField(
                db_default=django.db.models.functions.datetime.Now(), verbose_name="updated at"
            ),
        ),
    ]
