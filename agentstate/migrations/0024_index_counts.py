# What a listing's count needs, in the index it counts through: an approval
# request's deadline in the index of a caller's requests; a pause's status and
# expiry in the indexes of an owner's and a creator's pauses, and an event's owner in
# the index of a creator's events (to leave out what the caller owns). The count then
# reads the index alone, not each row (docs/performance.md, 2026-12-06).

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agentstate', '0023_parent_writes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='event',
            name='agentstate_event_created_by',
        ),
        migrations.AddIndex(
            model_name='event',
            index=models.Index(condition=models.Q(('created_by__isnull', False)), fields=['created_by', 'created_at', 'id', 'owner'], name='agentstate_event_created_by'),
        ),
        migrations.RemoveIndex(
            model_name='pausedrun',
            name='agentstate_pause_owner',
        ),
        migrations.AddIndex(
            model_name='pausedrun',
            index=models.Index(fields=['owner', 'status', 'expires_at'], name='agentstate_pause_owner'),
        ),
        migrations.RemoveIndex(
            model_name='pausedrun',
            name='agentstate_pause_created_by',
        ),
        migrations.AddIndex(
            model_name='pausedrun',
            index=models.Index(condition=models.Q(('created_by__isnull', False)), fields=['created_by', 'owner', 'status', 'expires_at'], name='agentstate_pause_created_by'),
        ),
        migrations.RemoveIndex(
            model_name='approvalrequest',
            name='agentstate_request_creator',
        ),
        migrations.AddIndex(
            model_name='approvalrequest',
            index=models.Index(condition=models.Q(('created_by__isnull', False)), fields=['created_by', 'status', 'created_at', 'id', 'deadline'], name='agentstate_request_creator'),
        ),
    ]
