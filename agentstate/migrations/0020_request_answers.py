# A request's operations answer json built by row_to_json (PostgreSQL), and an
# event's deliveries are read back only when the outbox wrote some.

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0019_checkpoint_put"),
    ]

    operations = [
        RunSQLFile("0020_request_answers.sql", "0020_request_answers.reverse.sql"),
    ]
