"""Celery tasks of agentstate: thin wrappers around the services.

Schedule ``agentstate.tasks.expire_pauses`` with Celery beat (the demo site
runs it every minute); sites using cron run ``manage.py agentstate_expire``.
"""

from celery import shared_task

from agentstate.services.sweep import sweep


@shared_task(name="agentstate.tasks.expire_pauses", ignore_result=True)
def expire_pauses() -> dict[str, int]:
    """Expire overdue pauses and approval requests, purge old pauses: the counts."""
    return sweep().as_dict()
