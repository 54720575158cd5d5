"""MySQL and MariaDB only: what their lack of partial indexes leaves out.

A unique constraint with a condition (a site scope's key is unique among the
scopes without an owner) is a unique key over a generated column there: the
key when the scope has no owner, else NULL (NULLs never collide). The partial
indexes of the sweep, the retention, the webhook sender and the policy lookup
are plain indexes over the same columns with the status first. PostgreSQL and
SQLite have them already: this migration does nothing there.
"""

from django.db import migrations

from agentstate.fields import exact_collation

# (table, index name, columns)
INDEXES = [
    ("agentstate_pausedrun", "agentstate_pause_status_expiry", "`status`, `expires_at`"),
    ("agentstate_pausedrun", "agentstate_pause_status_resolved", "`status`, `resolved_at`"),
    ("agentstate_delivery", "agentstate_delivery_status_due", "`status`, `next_attempt_at`"),
    ("agentstate_approvalpolicy", "agentstate_policy_tool", "`tool_name`, `revoked_at`"),
]


def forwards(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    schema_editor.execute(
        "ALTER TABLE `agentstate_scope` ADD COLUMN `site_key` varchar(255)"
        f" COLLATE {exact_collation(connection)}"
        " AS (CASE WHEN `owner_id` IS NULL THEN `key` END) VIRTUAL,"
        " ADD CONSTRAINT `agentstate_scope_site_key` UNIQUE (`site_key`)"
    )
    for table, name, columns in INDEXES:
        schema_editor.execute(f"CREATE INDEX `{name}` ON `{table}` ({columns})")


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "mysql":
        return
    for table, name, _ in INDEXES:
        schema_editor.execute(f"DROP INDEX `{name}` ON `{table}`")
    schema_editor.execute(
        "ALTER TABLE `agentstate_scope` DROP INDEX `agentstate_scope_site_key`,"
        " DROP COLUMN `site_key`"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("agentstate", "0004_status_constraints"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, atomic=False, elidable=False),
    ]
