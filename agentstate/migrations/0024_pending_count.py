# The deadline in the index of a caller's approval requests, so that the count of its
# pending ones reads the index alone, not each request's row for its deadline
# (docs/performance.md, 2026-12-06).

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agentstate', '0023_parent_writes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='approvalrequest',
            name='agentstate_request_creator',
        ),
        migrations.AddIndex(
            model_name='approvalrequest',
            index=models.Index(condition=models.Q(('created_by__isnull', False)), fields=['created_by', 'status', 'created_at', 'id', 'deadline'], name='agentstate_request_creator'),
        ),
    ]
