"""The PostgreSQL functions again: ``agentstate_store_get`` and ``agentstate_store_put``
(LangGraph store's get, a batch of them, and put in one call each), and
``agentstate_touch_thread`` setting a thread's ``updated_at`` at most once a minute,
``agentstate_purge_threads`` allowing for it (nothing on other databases)."""

from django.db import migrations

from agentstate.backends import postgresql


def install(apps, schema_editor):
    postgresql.install(schema_editor)


class Migration(migrations.Migration):
    dependencies = [("agentstate", "0007_langgraph_store_sweep")]

    operations = [migrations.RunPython(install, migrations.RunPython.noop, elidable=False)]
