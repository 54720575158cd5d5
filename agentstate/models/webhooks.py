"""Webhooks, and the outbox of their deliveries."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from agentstate.fields import AnyDepthJSONField

from .base import set_exactly_in
from .choices import DeliveryStatus
from .events import Event


class Webhook(models.Model):
    """A URL that wants events: every event of its ``kinds`` (none: all) is delivered
    to it, signed with its ``secret`` the Standard Webhooks way."""

    url = models.URLField(_("URL"), max_length=2000)
    secret = models.CharField(_("secret"), max_length=100, editable=False)
    kinds = AnyDepthJSONField(
        _("event kinds"), default=list, blank=True, help_text=_("None: every kind.")
    )
    active = models.BooleanField(_("active"), default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
    )
    created_at = models.DateTimeField(_("created at"), db_default=Now())

    class Meta:
        verbose_name = _("webhook")
        verbose_name_plural = _("webhooks")
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.url


class Delivery(models.Model):
    """One event for one webhook: the outbox row, written in the event's transaction."""

    Status = DeliveryStatus

    webhook = models.ForeignKey(
        Webhook,
        on_delete=models.CASCADE,
        related_name="deliveries",
        verbose_name=_("webhook"),
        db_index=False,
    )
    event = models.ForeignKey(
        Event, on_delete=models.CASCADE, related_name="deliveries", verbose_name=_("event")
    )
    status = models.CharField(
        _("status"), max_length=16, choices=Status.choices, default=Status.PENDING
    )
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    next_attempt_at = models.DateTimeField(_("next attempt at"), db_default=Now())
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    delivered_at = models.DateTimeField(_("delivered at"), null=True, blank=True)

    class Meta:
        verbose_name = _("webhook delivery")
        verbose_name_plural = _("webhook deliveries")
        ordering = ["-pk"]
        constraints = [
            models.UniqueConstraint(fields=["webhook", "event"], name="agentstate_delivery_once"),
            models.CheckConstraint(
                condition=Q(status__in=DeliveryStatus.values),
                name="agentstate_delivery_status_valid",
            ),
            # delivered exactly when it has a delivered_at
            set_exactly_in(
                "delivered_at", [DeliveryStatus.DELIVERED], "agentstate_delivery_delivered_at"
            ),
        ]
        indexes = [
            # What the sender picks up: pending deliveries that are due.
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status=DeliveryStatus.PENDING),
                name="agentstate_delivery_due",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} to {self.webhook_id}"


class DeliveryAttempt(models.Model):
    """One POST of a delivery: when, the answer's status, how long, what went wrong."""

    delivery = models.ForeignKey(
        Delivery, on_delete=models.CASCADE, related_name="attempt_log", verbose_name=_("delivery")
    )
    at = models.DateTimeField(_("at"), db_default=Now())
    status_code = models.PositiveSmallIntegerField(_("status code"), null=True, blank=True)
    duration_ms = models.PositiveIntegerField(_("duration (ms)"), default=0)
    error = models.TextField(_("error"), blank=True)

    class Meta:
        verbose_name = _("delivery attempt")
        verbose_name_plural = _("delivery attempts")
        ordering = ["pk"]
