"""Oversight: approval rules per tool, and the votes of the reviewers.

An ``ApprovalRule`` says who decides a tool's requests, how many must agree,
and what happens when nobody does; a request copies its tool's rule when it
is filed (``ApprovalRequest.rule`` and the values beside it), so a later change
of the rule applies to later requests only. A ``Vote`` is one reviewer's
decision of a request filed under a rule, with the digest of the arguments it
approves (``agentstate.types.arguments_digest``).
"""

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from .base import KEY_LENGTH
from .choices import Decision, OnDeadline


class ApprovalRule(models.Model):
    """Who decides a tool's requests, how many must agree, and the deadline."""

    OnDeadline = OnDeadline

    tool_name = models.CharField(_("tool name"), max_length=KEY_LENGTH, unique=True)
    approvals_required = models.PositiveIntegerField(
        _("approvals required"),
        default=1,
        validators=[MinValueValidator(1)],
        help_text=_("Distinct reviewers whose approval decides a request (M of N)."),
    )
    reviewers = models.ForeignKey(
        "auth.Group",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("reviewers"),
        help_text=_("Only its members may decide; none: anyone who may decide requests."),
    )
    allow_self_approval = models.BooleanField(
        _("allow self-approval"),
        default=False,
        help_text=_("Whether the user who created the run may decide its requests."),
    )
    deadline = models.PositiveIntegerField(
        _("deadline (seconds)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_("How long a request stays pending; none: APPROVAL_TTL."),
    )
    on_deadline = models.CharField(
        _("on deadline"), max_length=8, choices=OnDeadline.choices, default=OnDeadline.EXPIRE
    )
    remind_before = models.PositiveIntegerField(
        _("remind before (seconds)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_("Seconds before the deadline at which one approval.expiring is written."),
    )
    escalate_after = models.PositiveIntegerField(
        _("escalate after (seconds)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
    )
    escalate_to = models.ForeignKey(
        "auth.Group",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("escalate to"),
        help_text=_("Its members may decide too once escalate_after has passed."),
    )
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    # By the database's clock, as created_at: each save sets it to Now()
    # (agentstate.backends.orm.oversight), never the clock of the process saving.
    updated_at = models.DateTimeField(_("updated at"), db_default=Now())

    class Meta:
        verbose_name = _("approval rule")
        verbose_name_plural = _("approval rules")
        ordering = ["tool_name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(approvals_required__gte=1), name="agentstate_rule_required_positive"
            ),
            models.CheckConstraint(
                condition=Q(on_deadline__in=OnDeadline.values),
                name="agentstate_rule_on_deadline_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.tool_name


class Vote(models.Model):
    """One reviewer's decision of a request filed under a rule."""

    Decision = Decision

    request = models.ForeignKey(
        "ApprovalRequest",
        on_delete=models.CASCADE,
        related_name="votes",
        verbose_name=_("approval request"),
        db_index=False,
    )
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("by"),
    )
    decision = models.CharField(_("decision"), max_length=8, choices=Decision.choices)
    arguments = models.JSONField(_("arguments approved"), null=True, blank=True)
    arguments_digest = models.CharField(_("arguments digest"), max_length=64)
    reason = models.TextField(_("reason"), blank=True)
    at = models.DateTimeField(_("at"), db_default=Now())

    class Meta:
        verbose_name = _("vote")
        verbose_name_plural = _("votes")
        ordering = ["at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["request", "by"], name="agentstate_vote_once"),
            models.CheckConstraint(
                condition=Q(decision__in=Decision.values), name="agentstate_vote_decision_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.decision} ({self.arguments_digest[:12]})"
