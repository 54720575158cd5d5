# The Python API's calls, cheaper on the server: the functions as
# agentstate/migrations/sql/0011_api_speed.sql installs them (docs/performance.md,
# "Python API: where a call's time goes").

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ('agentstate', '0010_checkpoint_chains'),
    ]

    operations = [
        RunSQLFile("0011_api_speed.sql", "0011_api_speed.reverse.sql"),
    ]
