"""The operations' functions plan their statements once per connection.

PL/pgSQL chose a custom plan for each call of most operations (a generic plan
looked dearer to it), so every call planned its statements anew: most of a
read's time in the server. ``plan_cache_mode = force_generic_plan`` on each
operation's function keeps one plan per statement and connection.
"""

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0006_saver_sweep"),
    ]

    operations = [
        RunSQLFile("0007_generic_plans.sql", "0007_generic_plans.reverse.sql"),
    ]
