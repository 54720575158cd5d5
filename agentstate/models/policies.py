"""Approval policies (standing decisions) and budgets (caps on usage)."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from agentstate.fields import AnyDepthJSONField, ExactCharField
from agentstate.types import USAGE_FIELDS

from .base import KEY_LENGTH, where_set
from .choices import BudgetPeriod, Decision
from .querysets import ApprovalPolicyQuerySet
from .runs import Run


class ApprovalPolicy(models.Model):
    """A standing decision: later calls of ``tool_name`` in the runs of ``user``
    (none: every user's) whose arguments contain ``arguments`` are approved or
    rejected without asking anyone, until the policy expires or is revoked."""

    Decision = Decision

    tool_name = ExactCharField(_("tool name"), max_length=KEY_LENGTH)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("for the runs of"),
        help_text=_("None: the runs of every user."),
        db_index=False,
    )
    arguments = AnyDepthJSONField(
        _("arguments to match"),
        null=True,
        blank=True,
        help_text=_(
            "A call matches when its arguments contain these (every key equal,"
            " recursively). None: any arguments."
        ),
    )
    decision = models.CharField(_("decision"), max_length=8, choices=Decision.choices)
    expires_at = models.DateTimeField(_("expires at"), null=True, blank=True)
    reason = models.TextField(_("reason"), blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
        db_index=False,
    )
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("revoked by"),
        db_index=False,
    )

    objects = ApprovalPolicyQuerySet.as_manager()

    class Meta:
        verbose_name = _("approval policy")
        verbose_name_plural = _("approval policies")
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(decision__in=Decision.values),
                name="agentstate_policy_decision_valid",
            ),
            # who revoked it only with when
            models.CheckConstraint(
                condition=Q(revoked_by__isnull=True) | Q(revoked_at__isnull=False),
                name="agentstate_policy_revoked_at",
            ),
        ]
        indexes = [
            # what a filed call looks up: the tool's policies not revoked
            models.Index(
                fields=["tool_name"],
                condition=Q(revoked_at__isnull=True),
                name="agentstate_policy_active",
            ),
            where_set("user", "agentstate_policy_user"),
            where_set("created_by", "agentstate_policy_creator"),
            where_set("revoked_by", "agentstate_policy_revoker"),
        ]

    def __str__(self) -> str:
        return f"{self.decision} {self.tool_name}"


class Budget(models.Model):
    """Caps on usage: of one run, or of every run one user created (then reset each
    ``period``, by the database clock in UTC, or never). A cap left empty is none.

    A run's budget counts the run's own usage; a user's counts what was added to
    their runs since the budget was set or its period began (``used_*``)."""

    # The counters a budget caps: the first four of a run's usage (cached and
    # reasoning tokens are parts of the input and output tokens).
    COUNTERS = USAGE_FIELDS[:4]

    Period = BudgetPeriod

    run = models.OneToOneField(
        Run,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="budget",
        verbose_name=_("run"),
    )
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="agentstate_budget",
        verbose_name=_("user"),
    )
    period = models.CharField(
        _("resets every"), max_length=8, choices=Period.choices, blank=True, default=""
    )
    max_requests = models.PositiveBigIntegerField(_("requests cap"), null=True, blank=True)
    max_input_tokens = models.PositiveBigIntegerField(_("input tokens cap"), null=True, blank=True)
    max_output_tokens = models.PositiveBigIntegerField(
        _("output tokens cap"), null=True, blank=True
    )
    max_total_tokens = models.PositiveBigIntegerField(_("total tokens cap"), null=True, blank=True)
    used_requests = models.PositiveBigIntegerField(_("requests used"), default=0)
    used_input_tokens = models.PositiveBigIntegerField(_("input tokens used"), default=0)
    used_output_tokens = models.PositiveBigIntegerField(_("output tokens used"), default=0)
    used_total_tokens = models.PositiveBigIntegerField(_("total tokens used"), default=0)
    period_start = models.DateTimeField(_("period began"), db_default=Now())
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("budget")
        verbose_name_plural = _("budgets")
        constraints = [
            models.CheckConstraint(
                condition=Q(run__isnull=False, user__isnull=True, period="")
                | Q(run__isnull=True, user__isnull=False),
                name="agentstate_budget_run_or_user",
            ),
            models.CheckConstraint(
                condition=Q(period__in=["", *BudgetPeriod.values]),
                name="agentstate_budget_period_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"budget of {self.run or self.user}"

    @property
    def caps(self) -> dict[str, int | None]:
        return {name: getattr(self, f"max_{name}") for name in self.COUNTERS}

    @property
    def used(self) -> dict[str, int]:
        """The ``used_*`` counters as stored (a run's budget keeps none: see ``Run.usage``)."""
        return {name: getattr(self, f"used_{name}") for name in self.COUNTERS}
