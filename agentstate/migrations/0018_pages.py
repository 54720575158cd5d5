# Indexes in the order of a caller's listing of events (the events of what it owns,
# and of what it created), so that the page and its count read the caller's events
# alone rather than the whole table (docs/performance.md, 2026-12-05).

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agentstate', '0017_fewer_statements'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='event',
            name='agentstate_event_created_by',
        ),
        migrations.AddIndex(
            model_name='event',
            index=models.Index(fields=['owner', 'created_at', 'id'], name='agentstate_event_owner'),
        ),
        migrations.AddIndex(
            model_name='event',
            index=models.Index(condition=models.Q(('created_by__isnull', False)), fields=['created_by', 'created_at', 'id'], name='agentstate_event_created_by'),
        ),
    ]
