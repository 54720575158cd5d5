"""What came after 0.1.0: webhooks, approval policies and budgets, LangGraph's
checkpoints, and the PL/pgSQL functions of the PostgreSQL backend as this
release ships them (``sql/0003_functions.sql``, frozen with this migration;
nothing of them on other databases).

A later change of a function is a migration of its own with its own SQL file
(docs/development.md, "Changing a PL/pgSQL function").
"""

import django.db.models.deletion
import django.db.models.functions.datetime
import agentstate.fields
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import migrations, models

from agentstate.backends.postgresql.schema import RunSQLFile


def user_functions(apps, schema_editor):
    """``agentstate_user_id(username)``: the id of the site's user of that username,
    or NULL; ``agentstate_username(id)``: the other way round. Their SQL names the
    site's user model (``AUTH_USER_MODEL``), its table and columns as they are now."""
    if schema_editor.connection.vendor != "postgresql":
        return
    user = get_user_model()
    quote = schema_editor.quote_name
    username = quote(user._meta.get_field(user.USERNAME_FIELD).column)
    pk, table = quote(user._meta.pk.column), quote(user._meta.db_table)
    schema_editor.execute(
        "CREATE FUNCTION agentstate_user_id(p_username text) RETURNS bigint"
        f" LANGUAGE sql STABLE AS $$ SELECT {pk} FROM {table} WHERE {username} = p_username $$",
        params=None,
    )
    schema_editor.execute(
        "CREATE FUNCTION agentstate_username(p_id bigint) RETURNS text"
        f" LANGUAGE sql STABLE AS $$ SELECT {username}::text FROM {table} WHERE {pk} = p_id $$",
        params=None,
    )


class Migration(migrations.Migration):

    dependencies = [
        ('agentstate', '0002_leaner_indexes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Delivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('status', models.CharField(choices=[('pending', 'pending'), ('delivered', 'delivered'), ('failed', 'failed')], default='pending', max_length=16, verbose_name='status')),
                ('attempts', models.PositiveIntegerField(default=0, verbose_name='attempts')),
                ('next_attempt_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='next attempt at')),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='created at')),
                ('delivered_at', models.DateTimeField(blank=True, null=True, verbose_name='delivered at')),
                ('event', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='agentstate.event', verbose_name='event')),
            ],
            options={
                'verbose_name': 'webhook delivery',
                'verbose_name_plural': 'webhook deliveries',
                'ordering': ['-pk'],
            },
        ),
        migrations.CreateModel(
            name='DeliveryAttempt',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='at')),
                ('status_code', models.PositiveSmallIntegerField(blank=True, null=True, verbose_name='status code')),
                ('duration_ms', models.PositiveIntegerField(default=0, verbose_name='duration (ms)')),
                ('error', models.TextField(blank=True, verbose_name='error')),
                ('delivery', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='attempt_log', to='agentstate.delivery', verbose_name='delivery')),
            ],
            options={
                'verbose_name': 'delivery attempt',
                'verbose_name_plural': 'delivery attempts',
                'ordering': ['pk'],
            },
        ),
        migrations.CreateModel(
            name='Webhook',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('url', models.URLField(max_length=2000, verbose_name='URL')),
                ('secret', models.CharField(editable=False, max_length=100, verbose_name='secret')),
                ('kinds', agentstate.fields.AnyDepthJSONField(blank=True, default=list, help_text='None: every kind.', verbose_name='event kinds')),
                ('active', models.BooleanField(default=True, verbose_name='active')),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='created at')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='created by')),
            ],
            options={
                'verbose_name': 'webhook',
                'verbose_name_plural': 'webhooks',
                'ordering': ['pk'],
            },
        ),
        migrations.AddField(
            model_name='delivery',
            name='webhook',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='agentstate.webhook', verbose_name='webhook'),
        ),
        migrations.AddIndex(
            model_name='delivery',
            index=models.Index(condition=models.Q(('status', 'pending')), fields=['next_attempt_at'], name='agentstate_delivery_due'),
        ),
        migrations.AddConstraint(
            model_name='delivery',
            constraint=models.UniqueConstraint(fields=('webhook', 'event'), name='agentstate_delivery_once'),
        ),
        migrations.AddConstraint(
            model_name='delivery',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'delivered', 'failed'])), name='agentstate_delivery_status_valid'),
        ),
        migrations.CreateModel(
            name='Budget',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('period', models.CharField(blank=True, choices=[('day', 'day'), ('month', 'month')], default='', max_length=8, verbose_name='resets every')),
                ('max_requests', models.PositiveBigIntegerField(blank=True, null=True, verbose_name='requests cap')),
                ('max_input_tokens', models.PositiveBigIntegerField(blank=True, null=True, verbose_name='input tokens cap')),
                ('max_output_tokens', models.PositiveBigIntegerField(blank=True, null=True, verbose_name='output tokens cap')),
                ('max_total_tokens', models.PositiveBigIntegerField(blank=True, null=True, verbose_name='total tokens cap')),
                ('used_requests', models.PositiveBigIntegerField(default=0, verbose_name='requests used')),
                ('used_input_tokens', models.PositiveBigIntegerField(default=0, verbose_name='input tokens used')),
                ('used_output_tokens', models.PositiveBigIntegerField(default=0, verbose_name='output tokens used')),
                ('used_total_tokens', models.PositiveBigIntegerField(default=0, verbose_name='total tokens used')),
                ('period_start', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='period began')),
                ('updated_at', models.DateTimeField(auto_now=True, verbose_name='updated at')),
            ],
            options={
                'verbose_name': 'budget',
                'verbose_name_plural': 'budgets',
            },
        ),
        migrations.AddField(
            model_name='approvalrequest',
            name='approved_arguments',
            field=agentstate.fields.AnyDepthJSONField(blank=True, help_text='What the reviewer approved instead of the filed arguments.', null=True, verbose_name='approved arguments'),
        ),
        migrations.CreateModel(
            name='ApprovalPolicy',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tool_name', agentstate.fields.ExactCharField(max_length=255, verbose_name='tool name')),
                ('arguments', agentstate.fields.AnyDepthJSONField(blank=True, help_text='A call matches when its arguments contain these (every key equal, recursively). None: any arguments.', null=True, verbose_name='arguments to match')),
                ('decision', models.CharField(choices=[('approve', 'approve'), ('reject', 'reject')], max_length=8, verbose_name='decision')),
                ('expires_at', models.DateTimeField(blank=True, null=True, verbose_name='expires at')),
                ('reason', models.TextField(blank=True, verbose_name='reason')),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='created at')),
                ('revoked_at', models.DateTimeField(blank=True, null=True, verbose_name='revoked at')),
                ('created_by', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='created by')),
                ('revoked_by', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='revoked by')),
                ('user', models.ForeignKey(blank=True, db_index=False, help_text='None: the runs of every user.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='for the runs of')),
            ],
            options={
                'verbose_name': 'approval policy',
                'verbose_name_plural': 'approval policies',
                'ordering': ['-created_at', '-pk'],
            },
        ),
        migrations.AddField(
            model_name='approvalrequest',
            name='policy',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='decided_requests', to='agentstate.approvalpolicy', verbose_name='decided by policy'),
        ),
        migrations.AddIndex(
            model_name='approvalrequest',
            index=models.Index(condition=models.Q(('policy__isnull', False)), fields=['policy'], name='agentstate_request_policy'),
        ),
        migrations.AddField(
            model_name='budget',
            name='run',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='budget', to='agentstate.run', verbose_name='run'),
        ),
        migrations.AddField(
            model_name='budget',
            name='user',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='agentstate_budget', to=settings.AUTH_USER_MODEL, verbose_name='user'),
        ),
        migrations.AddIndex(
            model_name='approvalpolicy',
            index=models.Index(condition=models.Q(('revoked_at__isnull', True)), fields=['tool_name'], name='agentstate_policy_active'),
        ),
        migrations.AddIndex(
            model_name='approvalpolicy',
            index=models.Index(condition=models.Q(('user__isnull', False)), fields=['user'], name='agentstate_policy_user'),
        ),
        migrations.AddIndex(
            model_name='approvalpolicy',
            index=models.Index(condition=models.Q(('created_by__isnull', False)), fields=['created_by'], name='agentstate_policy_creator'),
        ),
        migrations.AddIndex(
            model_name='approvalpolicy',
            index=models.Index(condition=models.Q(('revoked_by__isnull', False)), fields=['revoked_by'], name='agentstate_policy_revoker'),
        ),
        migrations.AddConstraint(
            model_name='approvalpolicy',
            constraint=models.CheckConstraint(condition=models.Q(('decision__in', ['approve', 'reject'])), name='agentstate_policy_decision_valid'),
        ),
        migrations.AddConstraint(
            model_name='budget',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('period', ''), ('run__isnull', False), ('user__isnull', True)), models.Q(('run__isnull', True), ('user__isnull', False)), _connector='OR'), name='agentstate_budget_run_or_user'),
        ),
        migrations.AddConstraint(
            model_name='budget',
            constraint=models.CheckConstraint(condition=models.Q(('period__in', ['', 'day', 'month'])), name='agentstate_budget_period_valid'),
        ),
        migrations.CreateModel(
            name='Thread',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('thread_id', agentstate.fields.ExactCharField(max_length=255, verbose_name='thread id')),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='created at')),
                ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='updated at')),
            ],
            options={
                'verbose_name': 'LangGraph thread',
                'verbose_name_plural': 'LangGraph threads',
                'ordering': ['-updated_at', '-pk'],
                'indexes': [models.Index(fields=['updated_at'], name='agentstate_thread_updated')],
                'constraints': [models.UniqueConstraint(fields=('thread_id',), name='agentstate_thread_id')],
            },
        ),
        migrations.CreateModel(
            name='CheckpointWrite',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('checkpoint_ns', agentstate.fields.ExactTextField(blank=True, verbose_name='namespace')),
                ('checkpoint_id', agentstate.fields.ExactCharField(max_length=64, verbose_name='checkpoint id')),
                ('task_id', agentstate.fields.ExactCharField(max_length=255, verbose_name='task id')),
                ('task_path', models.TextField(blank=True, verbose_name='task path')),
                ('idx', models.IntegerField(verbose_name='index')),
                ('channel', agentstate.fields.ExactCharField(max_length=255, verbose_name='channel')),
                ('type', models.CharField(max_length=32, verbose_name='type')),
                ('blob', models.BinaryField(blank=True, null=True, verbose_name='value')),
                ('thread', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='writes', to='agentstate.thread', verbose_name='thread')),
            ],
            options={
                'verbose_name': 'LangGraph pending write',
                'verbose_name_plural': 'LangGraph pending writes',
                'ordering': ['task_path', 'task_id', 'idx'],
                'constraints': [agentstate.fields.TextUniqueConstraint(fields=('thread', 'checkpoint_ns', 'checkpoint_id', 'task_id', 'idx'), name='agentstate_write_task_idx')],
            },
        ),
        migrations.CreateModel(
            name='CheckpointBlob',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('checkpoint_ns', agentstate.fields.ExactTextField(blank=True, verbose_name='namespace')),
                ('channel', agentstate.fields.ExactCharField(max_length=255, verbose_name='channel')),
                ('version', agentstate.fields.ExactCharField(max_length=255, verbose_name='version')),
                ('type', models.CharField(max_length=32, verbose_name='type')),
                ('blob', models.BinaryField(blank=True, null=True, verbose_name='value')),
                ('thread', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='blobs', to='agentstate.thread', verbose_name='thread')),
            ],
            options={
                'verbose_name': 'LangGraph channel value',
                'verbose_name_plural': 'LangGraph channel values',
                'ordering': ['channel', 'version'],
                'constraints': [agentstate.fields.TextUniqueConstraint(fields=('thread', 'checkpoint_ns', 'channel', 'version'), name='agentstate_blob_version')],
            },
        ),
        migrations.CreateModel(
            name='Checkpoint',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('checkpoint_ns', agentstate.fields.ExactTextField(blank=True, verbose_name='namespace')),
                ('checkpoint_id', agentstate.fields.ExactCharField(max_length=64, verbose_name='checkpoint id')),
                ('parent_checkpoint_id', agentstate.fields.ExactCharField(blank=True, max_length=64, null=True, verbose_name='parent checkpoint id')),
                ('checkpoint', agentstate.fields.AnyDepthJSONField(verbose_name='checkpoint')),
                ('metadata', agentstate.fields.AnyDepthJSONField(blank=True, default=dict, verbose_name='metadata')),
                ('run_id', agentstate.fields.ExactCharField(blank=True, max_length=255, null=True, verbose_name='run id')),
                ('step', models.IntegerField(blank=True, null=True, verbose_name='step')),
                ('forked', models.BooleanField(default=False, verbose_name='forked')),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='created at')),
                ('thread', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='checkpoints', to='agentstate.thread', verbose_name='thread')),
            ],
            options={
                'verbose_name': 'LangGraph checkpoint',
                'verbose_name_plural': 'LangGraph checkpoints',
                'ordering': ['-checkpoint_id'],
                'indexes': [agentstate.fields.TextPrefixIndex(fields=['thread', 'checkpoint_ns', 'parent_checkpoint_id'], name='agentstate_checkpoint_parent'), models.Index(condition=models.Q(('run_id__isnull', False)), fields=['run_id'], name='agentstate_checkpoint_run')],
                'constraints': [agentstate.fields.TextUniqueConstraint(fields=('thread', 'checkpoint_ns', 'checkpoint_id'), name='agentstate_checkpoint_id')],
            },
        ),
        # Undone by the reverse SQL, which drops every agentstate_* function.
        migrations.RunPython(user_functions, migrations.RunPython.noop, elidable=False),
        RunSQLFile('0003_functions.sql', '0003_functions.reverse.sql'),
    ]
