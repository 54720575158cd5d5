"""The PL/pgSQL functions of the PostgreSQL backend (nothing on other databases)."""

from django.db import migrations

from agentstate.backends import postgresql


def install(apps, schema_editor):
    postgresql.install(schema_editor)


def uninstall(apps, schema_editor):
    postgresql.uninstall(schema_editor)


class Migration(migrations.Migration):
    dependencies = [("agentstate", "0002_leaner_indexes")]

    operations = [migrations.RunPython(install, uninstall, elidable=False)]
