"""The context functions' new list operations: extend and get_list (sql/10_context.sql)."""

from django.db import migrations

from agentstate.backends import postgresql


def install(apps, schema_editor):
    postgresql.install(schema_editor)


class Migration(migrations.Migration):
    dependencies = [("agentstate", "0006_langgraph")]

    operations = [migrations.RunPython(install, migrations.RunPython.noop, elidable=False)]
