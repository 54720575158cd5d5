"""Celery tasks of agentstate: thin wrappers around the services.

Schedule ``agentstate.tasks.expire_pauses`` with Celery beat (the demo site
runs it every minute); sites using cron run ``manage.py agentstate_expire``,
which needs no Celery. This module needs the ``celery`` extra. See
docs/deployment.md.
"""

from agentstate.extras import missing

try:
    from celery import shared_task
except ImportError as error:
    raise missing("celery", "agentstate.tasks", error) from error

from agentstate.services.sweep import sweep  # noqa: E402


@shared_task(name="agentstate.tasks.expire_pauses", ignore_result=True)
def expire_pauses() -> dict[str, int]:
    """Expire overdue pauses and approval requests, purge old pauses: the counts."""
    return sweep().as_dict()
