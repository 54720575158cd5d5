# A budget's change is recorded as the event kind "budget.set" (was "budget.changed"):
# the functions that record it (PostgreSQL), the events recorded so far and the
# webhooks subscribed to it, on every database.

from collections.abc import Callable
from typing import Any

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


def renamed(old: str, new: str) -> Callable[[Any, Any], None]:
    def rename(apps: Any, schema_editor: Any) -> None:
        alias = schema_editor.connection.alias
        apps.get_model("agentstate", "Event").objects.using(alias).filter(kind=old).update(kind=new)
        for webhook in apps.get_model("agentstate", "Webhook").objects.using(alias).all():
            if old in webhook.kinds:
                webhook.kinds = [new if kind == old else kind for kind in webhook.kinds]
                webhook.save(update_fields=["kinds"])

    return rename


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0024_index_counts"),
    ]

    operations = [
        RunSQLFile("0025_budget_set.sql", "0025_budget_set.reverse.sql"),
        migrations.RunPython(
            renamed("budget.changed", "budget.set"), renamed("budget.set", "budget.changed")
        ),
    ]
