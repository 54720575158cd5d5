"""The PostgreSQL functions again, with those added since 0006 (nothing on other
databases): ``agentstate_purge_store_items``, the sweep's batch of expired LangGraph
store items, and the list operations ``agentstate_get_list`` and ``agentstate_extend``."""

from django.db import migrations

from agentstate.backends import postgresql


def install(apps, schema_editor):
    postgresql.install(schema_editor)


class Migration(migrations.Migration):
    dependencies = [("agentstate", "0006_langgraph")]

    operations = [migrations.RunPython(install, migrations.RunPython.noop, elidable=False)]
