# The Python API's calls, cheaper on the server: the functions as
# agentstate/migrations/sql/0012_api_speed.sql installs them (docs/performance.md,
# "Python API: where a call's time goes").

from django.db import migrations

from agentstate.backends.postgresql.schema import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ('agentstate', '0011_saver_waits'),
    ]

    operations = [
        RunSQLFile("0012_api_speed.sql", "0012_api_speed.reverse.sql"),
    ]
