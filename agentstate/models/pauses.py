"""Paused runs: a run stopped inside one tool call, waiting for an answer."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from agentstate.fields import AnyDepthJSONField, ExactCharField

from .base import KEY_LENGTH, set_exactly_in, where_set
from .choices import PauseStatus
from .querysets import PausedRunQuerySet


class PausedRun(models.Model):
    """A run stopped inside one tool call, waiting for its owner's answer."""

    # How events and the admin name a pause: ``chat_id#tool_call_id``.
    OBJECT_ID_SEPARATOR = "#"

    Status = PauseStatus

    chat_id = ExactCharField(_("chat id"), max_length=KEY_LENGTH)
    tool_call_id = ExactCharField(_("tool call id"), max_length=KEY_LENGTH)
    owner = ExactCharField(
        _("owner"), max_length=KEY_LENGTH, help_text=_("The principal who may answer.")
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
        db_index=False,
    )
    question_id = models.UUIDField(_("question id"), default=uuid.uuid4)
    status = models.CharField(
        _("status"), max_length=16, choices=Status.choices, default=Status.PENDING
    )
    payload = AnyDepthJSONField(_("payload"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    expires_at = models.DateTimeField(_("expires at"))
    claimed_at = models.DateTimeField(_("claimed at"), null=True, blank=True)
    claimed_by = models.CharField(_("claimed by"), max_length=KEY_LENGTH, blank=True)
    resolved_at = models.DateTimeField(_("resolved at"), null=True, blank=True)

    objects = PausedRunQuerySet.as_manager()

    class Meta:
        verbose_name = _("paused run")
        verbose_name_plural = _("paused runs")
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["chat_id", "tool_call_id"], name="agentstate_pause_chat_call"
            ),
            models.CheckConstraint(
                condition=Q(status__in=PauseStatus.values),
                name="agentstate_pause_status_valid",
            ),
            # A pause is claimed once, then resolved; a pending one (put anew) or an
            # expired one was never claimed.
            set_exactly_in(
                "claimed_at",
                [PauseStatus.CLAIMED, PauseStatus.RESOLVED],
                "agentstate_pause_claimed_at",
            ),
            set_exactly_in("resolved_at", [PauseStatus.RESOLVED], "agentstate_pause_resolved_at"),
        ]
        indexes = [
            # Partial, so that a claim (pending to claimed) adds no entry to them.
            # with the id, so that each batch of the sweep starts where the last ended
            models.Index(
                fields=["expires_at", "id"],
                condition=Q(status=PauseStatus.PENDING),
                name="agentstate_pause_sweep",
            ),
            models.Index(
                fields=["resolved_at"],
                condition=Q(status=PauseStatus.RESOLVED),
                name="agentstate_pause_retention",
            ),
            models.Index(
                fields=["expires_at"],
                condition=Q(status=PauseStatus.EXPIRED),
                name="agentstate_pause_expired",
            ),
            # An owner's pauses, and a creator's, by status: with the expiry, the count
            # of the pending or expired ones a caller owns or created reads these alone.
            models.Index(fields=["owner", "status", "expires_at"], name="agentstate_pause_owner"),
            where_set("created_by", "agentstate_pause_created_by", "owner", "status", "expires_at"),
            # A listing's order: its page read from the newest, not sorted from all rows.
            models.Index(fields=["created_at", "id"], name="agentstate_pause_created"),
        ]

    def __str__(self) -> str:
        return self.object_id(self.chat_id, self.tool_call_id)

    @classmethod
    def object_id(cls, chat_id: str, tool_call_id: str) -> str:
        """The name of the pause of ``(chat_id, tool_call_id)`` in the event log."""
        return f"{chat_id}{cls.OBJECT_ID_SEPARATOR}{tool_call_id}"
