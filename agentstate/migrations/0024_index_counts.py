# What a listing's count needs, in the index it counts through: an approval
# request's deadline in the index of a caller's requests; a pause's status and
# expiry in the indexes of an owner's and a creator's pauses, and an event's owner in
# the index of a creator's events (to leave out what the caller owns). The count then
# reads the index alone, not each row (docs/performance.md, 2026-12-06).
#
# Each index is built anew beside the one it replaces, which is then dropped and the
# new one given its name. On PostgreSQL both happen concurrently, outside a
# transaction: the tables' writes go on meanwhile (the event log is the largest
# table), and a listing always has an index to read.

from django.conf import settings
from django.db import migrations, models

from agentstate.backends.postgresql.schema import AddIndexConcurrently, RemoveIndexConcurrently


def replaced(model_name: str, index: models.Index) -> list[migrations.operations.base.Operation]:
    """``index`` in place of the one of its name on ``model_name``."""
    building = f"{index.name}_2"
    built = index.clone()
    built.name = building
    return [
        AddIndexConcurrently(model_name=model_name, index=built),
        RemoveIndexConcurrently(model_name=model_name, name=index.name),
        migrations.RenameIndex(model_name=model_name, new_name=index.name, old_name=building),
    ]


class Migration(migrations.Migration):
    atomic = False  # PostgreSQL builds and drops an index concurrently only so

    dependencies = [
        ('agentstate', '0023_parent_writes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        *replaced('event', models.Index(condition=models.Q(('created_by__isnull', False)), fields=['created_by', 'created_at', 'id', 'owner'], name='agentstate_event_created_by')),
        *replaced('pausedrun', models.Index(fields=['owner', 'status', 'expires_at'], name='agentstate_pause_owner')),
        *replaced('pausedrun', models.Index(condition=models.Q(('created_by__isnull', False)), fields=['created_by', 'owner', 'status', 'expires_at'], name='agentstate_pause_created_by')),
        *replaced('approvalrequest', models.Index(condition=models.Q(('created_by__isnull', False)), fields=['created_by', 'status', 'created_at', 'id', 'deadline'], name='agentstate_request_creator')),
    ]
