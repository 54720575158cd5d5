"""The audit trail."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from agentstate.fields import AnyDepthJSONField, ExactCharField

from .base import KEY_LENGTH, where_set
from .querysets import EventQuerySet


class Event(models.Model):
    """An append-only audit trail of the changes a person would audit.

    Written in the same transaction as the change; ``created_by`` and
    ``owner`` copy the object's creator and owner so that the log stays
    visible to them after the object is gone.
    """

    kind = models.CharField(_("kind"), max_length=64)
    actor = models.CharField(_("actor"), max_length=KEY_LENGTH, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("user"),
        db_index=False,
    )
    object_type = models.CharField(_("object type"), max_length=32)
    object_id = ExactCharField(_("object id"), max_length=2 * KEY_LENGTH + 1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("object created by"),
        db_index=False,
    )
    owner = ExactCharField(_("object owner"), max_length=KEY_LENGTH, blank=True)
    details = AnyDepthJSONField(_("details"), default=dict, blank=True)
    created_at = models.DateTimeField(_("created at"), db_default=Now(), db_index=True)

    objects = EventQuerySet.as_manager()

    # Not a column: the ids of the webhook deliveries ``events.save`` wrote with it.
    delivery_ids: list[int]

    class Meta:
        verbose_name = _("event")
        verbose_name_plural = _("events")
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["object_type", "object_id"], name="agentstate_event_object"),
            # not db_index=True: on PostgreSQL that adds a LIKE index nothing uses
            models.Index(fields=["kind"], name="agentstate_event_kind"),
            where_set("user", "agentstate_event_user"),
            # A caller's listing in its order: the events of what it owns, and of what
            # it created (also what deleting a user looks up), with their owner to
            # leave out what it owns: each part counted and cut from its index alone.
            models.Index(fields=["owner", "created_at", "id"], name="agentstate_event_owner"),
            models.Index(
                fields=["created_by", "created_at", "id", "owner"],
                condition=Q(created_by__isnull=False),
                name="agentstate_event_created_by",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.object_type}:{self.object_id}"
