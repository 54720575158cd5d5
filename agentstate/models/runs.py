"""Runs with their usage, and tool-call approvals: the records and the review queue."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from agentstate.fields import AnyDepthJSONField, ExactCharField
from agentstate.types import USAGE_FIELDS, Records

from .base import KEY_LENGTH, RUN_ID_LENGTH, set_exactly_in, set_only_in, where_set
from .choices import Decision, OnDeadline, RequestStatus
from .querysets import ApprovalRequestQuerySet, RunQuerySet

# The statuses of a decided request.
DECIDED = [RequestStatus.APPROVED, RequestStatus.REJECTED]


class Run(models.Model):
    """One agent run: the application's context, token usage, approvals."""

    USAGE_FIELDS = USAGE_FIELDS

    run_id = ExactCharField(_("run id"), max_length=RUN_ID_LENGTH, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
    )
    context = AnyDepthJSONField(_("context"), default=dict, blank=True)
    requests = models.PositiveBigIntegerField(_("requests"), default=0)
    input_tokens = models.PositiveBigIntegerField(_("input tokens"), default=0)
    output_tokens = models.PositiveBigIntegerField(_("output tokens"), default=0)
    total_tokens = models.PositiveBigIntegerField(_("total tokens"), default=0)
    cached_tokens = models.PositiveBigIntegerField(_("cached tokens"), default=0)
    reasoning_tokens = models.PositiveBigIntegerField(_("reasoning tokens"), default=0)
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    objects = RunQuerySet.as_manager()

    # Not a column: the approval records map a backend reads with the run it returns.
    approvals: Records

    class Meta:
        verbose_name = _("run")
        verbose_name_plural = _("runs")
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return self.run_id

    @property
    def usage(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.USAGE_FIELDS}


class ApprovalRecord(models.Model):
    """The approval state of one tool in one run, as the Agents SDK keeps it.

    ``approved_always`` / ``rejected_always`` hold the permanent flags
    (``True`` or ``False``); ``None`` means the SDK's list form, whose call ids
    are ``ApprovalCall`` rows.
    """

    run = models.ForeignKey(
        Run,
        on_delete=models.CASCADE,
        related_name="approval_records",
        verbose_name=_("run"),
        db_index=False,
    )
    tool_name = ExactCharField(_("tool name"), max_length=KEY_LENGTH)
    approved_always = models.BooleanField(_("approved permanently"), null=True, blank=True)
    rejected_always = models.BooleanField(_("rejected permanently"), null=True, blank=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("updated by"),
    )

    class Meta:
        verbose_name = _("approval record")
        verbose_name_plural = _("approval records")
        ordering = ["tool_name"]
        constraints = [
            models.UniqueConstraint(fields=["run", "tool_name"], name="agentstate_record_run_tool"),
        ]

    def __str__(self) -> str:
        return self.tool_name


class ApprovalCall(models.Model):
    """One call id in a record's ``approved`` or ``rejected`` list: who, when, why."""

    Decision = Decision

    record = models.ForeignKey(
        ApprovalRecord, on_delete=models.CASCADE, related_name="calls", db_index=False
    )
    call_id = ExactCharField(_("call id"), max_length=KEY_LENGTH)
    decision = models.CharField(_("decision"), max_length=8, choices=Decision.choices)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("decided by"),
    )
    reason = models.TextField(_("reason"), blank=True)
    created_at = models.DateTimeField(_("decided at"), db_default=Now())

    class Meta:
        verbose_name = _("approval call")
        verbose_name_plural = _("approval calls")
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["record", "decision", "call_id"], name="agentstate_call_unique"
            ),
            models.CheckConstraint(
                condition=Q(decision__in=Decision.values),
                name="agentstate_call_decision_valid",
            ),
        ]


class ApprovalRequest(models.Model):
    """A tool call waiting for a reviewer: the review queue."""

    Status = RequestStatus

    run = models.ForeignKey(
        Run,
        on_delete=models.CASCADE,
        related_name="approval_requests",
        verbose_name=_("run"),
        db_index=False,
    )
    tool_name = ExactCharField(_("tool name"), max_length=KEY_LENGTH)
    call_id = ExactCharField(_("call id"), max_length=KEY_LENGTH)
    arguments = AnyDepthJSONField(_("arguments"), null=True, blank=True)
    status = models.CharField(
        _("status"), max_length=16, choices=Status.choices, default=Status.PENDING
    )
    always = models.BooleanField(_("decided permanently"), default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("decided by"),
    )
    decided_at = models.DateTimeField(_("decided at"), null=True, blank=True)
    reason = models.TextField(_("reason"), blank=True)
    policy = models.ForeignKey(
        "ApprovalPolicy",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="decided_requests",
        verbose_name=_("decided by policy"),
        db_index=False,
    )
    approved_arguments = AnyDepthJSONField(
        _("approved arguments"),
        null=True,
        blank=True,
        help_text=_("What the reviewer approved instead of the filed arguments."),
    )
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    # Oversight: the tool's rule as it stood at filing (no rule: one decision,
    # by anyone, pending until APPROVAL_TTL), and the call's lifecycle.
    rule = models.ForeignKey(
        "ApprovalRule",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("filed under rule"),
        db_index=False,
    )
    approvals_required = models.PositiveIntegerField(
        _("approvals required"), default=1, db_default=1
    )
    reviewers = models.ForeignKey(
        "auth.Group",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("reviewers"),
        db_index=False,
    )
    allow_self_approval = models.BooleanField(
        _("allow self-approval"), default=True, db_default=True
    )
    deadline = models.DateTimeField(
        _("deadline"),
        null=True,
        blank=True,
        help_text=_("Fixed at filing under a rule; none: created at plus APPROVAL_TTL."),
    )
    on_deadline = models.CharField(
        _("on deadline"),
        max_length=8,
        choices=OnDeadline.choices,
        default=OnDeadline.EXPIRE,
        db_default=OnDeadline.EXPIRE,
    )
    remind_at = models.DateTimeField(_("remind at"), null=True, blank=True)
    reminded_at = models.DateTimeField(_("reminded at"), null=True, blank=True)
    escalate_at = models.DateTimeField(_("escalate at"), null=True, blank=True)
    escalate_to = models.ForeignKey(
        "auth.Group",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("escalate to"),
        db_index=False,
    )
    escalated_at = models.DateTimeField(_("escalated at"), null=True, blank=True)
    arguments_digest = models.CharField(
        _("arguments digest"),
        max_length=64,
        blank=True,
        default="",
        db_default="",
        help_text=_("SHA-256 of the arguments as filed, then as approved."),
    )
    consumed_at = models.DateTimeField(_("consumed at"), null=True, blank=True)

    objects = ApprovalRequestQuerySet.as_manager()

    class Meta:
        verbose_name = _("approval request")
        verbose_name_plural = _("approval requests")
        ordering = ["created_at", "pk"]
        permissions = [("decide_approvalrequest", _("Can approve or reject approval requests"))]
        constraints = [
            models.UniqueConstraint(fields=["run", "call_id"], name="agentstate_request_run_call"),
            models.CheckConstraint(
                condition=Q(status__in=RequestStatus.values),
                name="agentstate_request_status_valid",
            ),
            # Decided (approved or rejected) exactly when it has a decided_at; only a
            # decided request names who or which policy decided it, and only an
            # approved one keeps edited arguments.
            set_exactly_in("decided_at", DECIDED, "agentstate_request_decided_at"),
            set_only_in("decided_by", DECIDED, "agentstate_request_decided_by"),
            set_only_in("policy", DECIDED, "agentstate_request_policy_decided"),
            set_only_in(
                "approved_arguments", [RequestStatus.APPROVED], "agentstate_request_edit_approved"
            ),
            set_only_in("consumed_at", [RequestStatus.APPROVED], "agentstate_request_consumed"),
        ]
        indexes = [
            models.Index(fields=["status", "created_at"], name="agentstate_request_queue"),
            # A caller's listing (the requests it filed) in its order, by status; with
            # the deadline, its count of pending ones reads the index alone.
            models.Index(
                fields=["created_by", "status", "created_at", "id", "deadline"],
                condition=Q(created_by__isnull=False),
                name="agentstate_request_creator",
            ),
            where_set("policy", "agentstate_request_policy"),
            models.Index(
                fields=["deadline"],
                condition=Q(status=RequestStatus.PENDING, deadline__isnull=False),
                name="agentstate_request_deadline",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.call_id})"
