# Resolving a pause pending past its expiry is refused naming it expired, swept or
# not (PostgreSQL; the portable backend says the same).

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0027_standing_decisions"),
    ]

    operations = [
        RunSQLFile("0028_expired_pause_resolve.sql", "0028_expired_pause_resolve.reverse.sql"),
    ]
