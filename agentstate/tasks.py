"""Celery tasks of agentstate: thin wrappers around the services.

Schedule ``agentstate.tasks.expire_pauses`` and ``agentstate.tasks.send_webhooks``
with Celery beat (the demo site runs both every minute); sites using cron run
``manage.py agentstate_expire``, which needs no Celery. This module needs the
``celery`` extra. See docs/deployment.md.
"""

from agentstate.extras import missing

try:
    from celery import shared_task
except ImportError as error:
    raise missing("celery", "agentstate.tasks", error) from error

from agentstate.services import webhooks  # noqa: E402
from agentstate.services.sweep import sweep  # noqa: E402


@shared_task(name="agentstate.tasks.expire_pauses", ignore_result=True)
def expire_pauses() -> dict[str, int]:
    """Expire overdue pauses and approval requests, purge old pauses: the counts."""
    return sweep().as_dict()


@shared_task(
    name="agentstate.tasks.deliver_webhook",
    ignore_result=True,
    acks_late=True,
    reject_on_worker_lost=True,
)
def deliver_webhook(delivery_id: int) -> None:
    """Send one webhook delivery; a failure schedules the next try."""
    wait = webhooks.deliver(delivery_id)
    if wait is not None:
        deliver_webhook.apply_async((delivery_id,), countdown=wait.total_seconds())


@shared_task(name="agentstate.tasks.send_webhooks", ignore_result=True)
def send_webhooks() -> int:
    """Queue every delivery that is due (left behind by a lost message or a killed
    worker, or a retry whose message was lost): how many. Run it with beat."""
    due = webhooks.due()
    for delivery_id in due:
        deliver_webhook.delay(delivery_id)
    return len(due)


def queue_deliveries(delivery_ids: list[int]) -> None:
    """Queue the deliveries an event wrote, once its transaction has committed."""
    for delivery_id in delivery_ids:
        deliver_webhook.delay(delivery_id)
