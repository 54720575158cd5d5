"""Webhooks: subscriptions, the outbox of deliveries, and sending them.

Every event a webhook wants gets a ``Delivery`` row in the event's own
transaction (the backends' outbox, ``agentstate.backends.events``), so nothing
is lost between a commit and a crash. After the commit, a Celery task sends
each one (``deliver``); a delivery
that fails is tried again with exponential backoff and jitter, up to
``WEBHOOK_ATTEMPTS``, every attempt kept. The beat task (``due``) sends
whatever a lost broker message or a killed worker left behind: a delivery is
claimed for a lease (its next attempt moved past the timeout) before it is
sent, so it is sent at least once, and again only if nobody recorded an
answer in time. Receivers deduplicate by ``webhook-id``.
"""

import json
import random
import time
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, QuerySet
from django.db.models.functions import Now

from agentstate import signals, webhooks
from agentstate.conf import agentstate_settings
from agentstate.exceptions import BadInput, NotFound
from agentstate.models import Delivery, DeliveryAttempt, Event, Webhook

from .acting import By, takes_by
from .runs import real_user

Status = Delivery.Status
KINDS = tuple(signals.BY_KIND)  # every event kind


class WebhookNotFound(NotFound):
    code = "not_found"
    default_detail = "Webhook not found."


def check_kinds(kinds: Any) -> list[str]:
    """The event kinds a webhook wants, deduplicated (none: every kind); ``BadInput``."""
    if kinds is None:
        return []
    if not isinstance(kinds, list) or not all(isinstance(kind, str) for kind in kinds):
        raise BadInput("kinds must be a list of event kinds.", field="kinds")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise BadInput(f"kinds: {unknown[0]!r} is no event kind.", field="kinds")
    return list(dict.fromkeys(kinds))


def check_target(url: str) -> None:
    """Refuse a URL that can never be a target (``RefusedTarget``): another scheme, no
    host, or (unless ``WEBHOOK_ALLOW_PRIVATE``) a private address. A name that does
    not resolve yet is accepted: every attempt checks the target again."""
    webhooks.check_url(url)
    if not agentstate_settings.WEBHOOK_ALLOW_PRIVATE:
        try:
            webhooks.resolve(url, allow_private=False)
        except webhooks.Unresolved:
            pass


@takes_by("user")
def create_webhook(
    url: str, kinds: list[str] | None = None, active: bool = True, *, by: By = None
) -> Webhook:
    """A new webhook; its ``secret`` is shown to its creator once, in what this returns."""
    check_target(url)
    if not isinstance(active, bool):
        raise BadInput("active must be true or false.", field="active")
    return Webhook.objects.create(
        url=url,
        kinds=check_kinds(kinds),
        active=active,
        secret=webhooks.new_secret(),
        created_by=real_user(by),
    )


def delete_webhook(pk: int) -> None:
    deleted, _ = Webhook.objects.filter(pk=pk).delete()
    if not deleted:
        raise WebhookNotFound(f"Webhook {pk} not found.")


def body(event: Event) -> bytes:
    """What a delivery POSTs: ``{"id", "kind", "created_at", "data"}``."""
    return json.dumps(
        {
            "id": event.pk,
            "kind": event.kind,
            "created_at": event.created_at.isoformat(),
            "data": {
                "object_type": event.object_type,
                "object_id": event.object_id,
                "actor": event.actor,
                "owner": event.owner,
                "details": event.details,
            },
        },
        separators=(",", ":"),
    ).encode()


def message_id(delivery: Delivery) -> str:
    """The ``webhook-id`` of every attempt of one delivery."""
    return f"agentstate-delivery-{delivery.pk}"


def _lease() -> timedelta:
    """How long a claimed delivery is left to its sender before it is due again."""
    return agentstate_settings.WEBHOOK_TIMEOUT * 3


def backoff(attempts: int) -> timedelta:
    """The wait after the ``attempts``-th failed try: doubling from ``WEBHOOK_BACKOFF``,
    stretched by up to half at random so that retries of many deliveries spread."""
    doubling: int = 2 ** (attempts - 1)  # attempts >= 1
    return agentstate_settings.WEBHOOK_BACKOFF * doubling * (1 + random.random() / 2)


def deliver(pk: int) -> timedelta | None:
    """Send delivery ``pk`` if it is pending and due; returns when to try it again
    (``None``: delivered, failed for good, or not this sender's to send)."""
    claimed = Delivery.objects.filter(pk=pk, status=Status.PENDING, next_attempt_at__lte=Now())
    if not claimed.update(attempts=F("attempts") + 1, next_attempt_at=Now() + _lease()):
        return None
    delivery = Delivery.objects.select_related("webhook", "event").get(pk=pk)
    hook = delivery.webhook
    if not hook.active:
        answer = webhooks.Answer(None, 0, "the webhook is inactive")
    else:
        payload = body(delivery.event)
        stamp = int(time.time())
        msg = message_id(delivery)
        answer = webhooks.post(
            hook.url,
            payload,
            {
                "webhook-id": msg,
                "webhook-timestamp": str(stamp),
                "webhook-signature": webhooks.signature(hook.secret, msg, stamp, payload),
            },
            timeout=agentstate_settings.WEBHOOK_TIMEOUT.total_seconds(),
            allow_private=agentstate_settings.WEBHOOK_ALLOW_PRIVATE,
        )
    return _record(delivery, answer)


@transaction.atomic
def _record(delivery: Delivery, answer: webhooks.Answer) -> timedelta | None:
    DeliveryAttempt.objects.create(
        delivery=delivery,
        status_code=answer.status_code,
        duration_ms=answer.duration_ms,
        error=answer.error,
    )
    rows = Delivery.objects.filter(pk=delivery.pk, status=Status.PENDING)
    if answer.ok:
        rows.update(status=Status.DELIVERED, delivered_at=Now())
        return None
    if delivery.attempts >= agentstate_settings.WEBHOOK_ATTEMPTS or not delivery.webhook.active:
        rows.update(status=Status.FAILED)
        return None
    wait = backoff(delivery.attempts)
    rows.update(next_attempt_at=Now() + wait)
    return wait


def due(limit: int = 1000) -> list[int]:
    """Pending deliveries whose time has come (left behind, or retries): their ids."""
    return list(
        Delivery.objects.filter(status=Status.PENDING, next_attempt_at__lte=Now())
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )


def send_again(deliveries: QuerySet[Delivery]) -> int:
    """Make failed deliveries pending and due now, with a fresh count of attempts."""
    return deliveries.filter(status=Status.FAILED).update(
        status=Status.PENDING, attempts=0, next_attempt_at=Now()
    )
