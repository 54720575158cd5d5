"""What agentstate keeps, with its invariants as database constraints.

Four parts, one per reference design: context variables (``Scope``,
``Variable``, ``Element``), paused runs (``PausedRun``), runs with usage and
tool-call approvals (``Run``, ``ApprovalRecord``, ``ApprovalCall``,
``ApprovalRequest``), and the audit trail (``Event``). Every state change goes
through ``agentstate.services``; the models only hold state and filters.

A foreign key that leads a unique constraint has no index of its own
(``db_index=False``): the constraint's index serves its lookups, and a second
one only costs writes and can lure the planner into scanning every element of
a long list.
"""

import uuid
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from agentstate.querysets import ApprovalRequestQuerySet, PausedRunQuerySet

if TYPE_CHECKING:
    from agentstate.backends.base import Records

KEY_LENGTH = 255
RUN_ID_LENGTH = 128


def where_set(field: str, name: str) -> models.Index:
    """An index of a nullable user key over the rows that have one: what deleting a
    user looks up, and no entry for the many rows written without a user."""
    return models.Index(fields=[field], condition=Q(**{f"{field}__isnull": False}), name=name)


class Scope(models.Model):
    """A named state space (a project directory, a conversation, a tenant).

    Keys are unique per owner; ``owner=None`` is the site's own namespace.
    """

    key = models.CharField(_("key"), max_length=KEY_LENGTH)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="agentstate_scopes",
        db_index=False,
        verbose_name=_("owner"),
    )
    created_at = models.DateTimeField(_("created at"), db_default=Now())

    class Meta:
        verbose_name = _("scope")
        verbose_name_plural = _("scopes")
        ordering = ["key", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="agentstate_scope_owner_key"),
            models.UniqueConstraint(
                fields=["key"], condition=Q(owner__isnull=True), name="agentstate_scope_site_key"
            ),
        ]

    def __str__(self) -> str:
        return self.key if self.owner_id is None else f"{self.key} ({self.owner})"


class Variable(models.Model):
    """One JSON value of a scope, with a version that grows on every change.

    A list is kept as ``Element`` rows at positions ``head`` .. ``tail - 1`` so
    that push and pop touch one row whatever the list's length; any other
    value is kept in ``value``.
    """

    scope = models.ForeignKey(
        Scope,
        on_delete=models.CASCADE,
        related_name="variables",
        verbose_name=_("scope"),
        db_index=False,
    )
    name = models.CharField(_("name"), max_length=KEY_LENGTH)
    is_list = models.BooleanField(_("is a list"), default=False)
    value = models.JSONField(_("value"), null=True, blank=True)
    head = models.BigIntegerField(_("position of the first element"), default=0)
    tail = models.BigIntegerField(_("position after the last element"), default=0)
    version = models.PositiveBigIntegerField(_("version"), default=1)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    updated_by = models.CharField(_("updated by"), max_length=KEY_LENGTH, blank=True)

    class Meta:
        verbose_name = _("variable")
        verbose_name_plural = _("variables")
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "name"], name="agentstate_variable_scope_name"
            ),
            models.CheckConstraint(
                condition=Q(tail__gte=models.F("head")), name="agentstate_variable_bounds"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def length(self) -> int:
        return self.tail - self.head


class Element(models.Model):
    """One element of a list variable, ordered by ``position``."""

    variable = models.ForeignKey(
        Variable, on_delete=models.CASCADE, related_name="elements", db_index=False
    )
    position = models.BigIntegerField()
    value = models.JSONField(null=True)

    class Meta:
        verbose_name = _("list element")
        verbose_name_plural = _("list elements")
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(
                fields=["variable", "position"], name="agentstate_element_variable_position"
            ),
        ]


class PausedRun(models.Model):
    """A run stopped inside one tool call, waiting for its owner's answer."""

    # How events and the admin name a pause: ``chat_id#tool_call_id``.
    OBJECT_ID_SEPARATOR = "#"

    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        CLAIMED = "claimed", _("claimed")
        RESOLVED = "resolved", _("resolved")
        EXPIRED = "expired", _("expired")

    chat_id = models.CharField(_("chat id"), max_length=KEY_LENGTH)
    tool_call_id = models.CharField(_("tool call id"), max_length=KEY_LENGTH)
    owner = models.CharField(
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
    payload = models.JSONField(_("payload"), null=True, blank=True)
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
                condition=Q(status__in=["pending", "claimed", "resolved", "expired"]),
                name="agentstate_pause_status_valid",
            ),
        ]
        indexes = [
            # Partial, so that a claim (pending to claimed) adds no entry to them.
            # with the id, so that each batch of the sweep starts where the last ended
            models.Index(
                fields=["expires_at", "id"],
                condition=Q(status="pending"),
                name="agentstate_pause_sweep",
            ),
            models.Index(
                fields=["resolved_at"],
                condition=Q(status="resolved"),
                name="agentstate_pause_retention",
            ),
            models.Index(
                fields=["expires_at"],
                condition=Q(status="expired"),
                name="agentstate_pause_expired",
            ),
            models.Index(fields=["owner", "status"], name="agentstate_pause_owner"),
            where_set("created_by", "agentstate_pause_created_by"),
        ]

    def __str__(self) -> str:
        return self.object_id(self.chat_id, self.tool_call_id)

    @classmethod
    def object_id(cls, chat_id: str, tool_call_id: str) -> str:
        """The name of the pause of ``(chat_id, tool_call_id)`` in the event log."""
        return f"{chat_id}{cls.OBJECT_ID_SEPARATOR}{tool_call_id}"


class Run(models.Model):
    """One agent run: the application's context, token usage, approvals."""

    USAGE_FIELDS = (
        "requests",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cached_tokens",
        "reasoning_tokens",
    )

    run_id = models.CharField(_("run id"), max_length=RUN_ID_LENGTH, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
    )
    context = models.JSONField(_("context"), default=dict, blank=True)
    requests = models.PositiveBigIntegerField(_("requests"), default=0)
    input_tokens = models.PositiveBigIntegerField(_("input tokens"), default=0)
    output_tokens = models.PositiveBigIntegerField(_("output tokens"), default=0)
    total_tokens = models.PositiveBigIntegerField(_("total tokens"), default=0)
    cached_tokens = models.PositiveBigIntegerField(_("cached tokens"), default=0)
    reasoning_tokens = models.PositiveBigIntegerField(_("reasoning tokens"), default=0)
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    # Not a column: the approval records map a backend reads with the run it returns.
    approvals: "Records"

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
    tool_name = models.CharField(_("tool name"), max_length=KEY_LENGTH)
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

    class Decision(models.TextChoices):
        APPROVE = "approve", _("approve")
        REJECT = "reject", _("reject")

    record = models.ForeignKey(
        ApprovalRecord, on_delete=models.CASCADE, related_name="calls", db_index=False
    )
    call_id = models.CharField(_("call id"), max_length=KEY_LENGTH)
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
                condition=Q(decision__in=["approve", "reject"]),
                name="agentstate_call_decision_valid",
            ),
        ]


class ApprovalRequest(models.Model):
    """A tool call waiting for a reviewer: the review queue."""

    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        APPROVED = "approved", _("approved")
        REJECTED = "rejected", _("rejected")
        EXPIRED = "expired", _("expired")

    run = models.ForeignKey(
        Run,
        on_delete=models.CASCADE,
        related_name="approval_requests",
        verbose_name=_("run"),
        db_index=False,
    )
    tool_name = models.CharField(_("tool name"), max_length=KEY_LENGTH)
    call_id = models.CharField(_("call id"), max_length=KEY_LENGTH)
    arguments = models.JSONField(_("arguments"), null=True, blank=True)
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
    approved_arguments = models.JSONField(
        _("approved arguments"),
        null=True,
        blank=True,
        help_text=_("What the reviewer approved instead of the filed arguments."),
    )
    created_at = models.DateTimeField(_("created at"), db_default=Now())

    objects = ApprovalRequestQuerySet.as_manager()

    class Meta:
        verbose_name = _("approval request")
        verbose_name_plural = _("approval requests")
        ordering = ["created_at", "pk"]
        permissions = [("decide_approvalrequest", _("Can approve or reject approval requests"))]
        constraints = [
            models.UniqueConstraint(fields=["run", "call_id"], name="agentstate_request_run_call"),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "approved", "rejected", "expired"]),
                name="agentstate_request_status_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "created_at"], name="agentstate_request_queue"),
            where_set("policy", "agentstate_request_policy"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.call_id})"


class ApprovalPolicy(models.Model):
    """A standing decision: later calls of ``tool_name`` in the runs of ``user``
    (none: every user's) whose arguments contain ``arguments`` are approved or
    rejected without asking anyone, until the policy expires or is revoked."""

    class Decision(models.TextChoices):
        APPROVE = "approve", _("approve")
        REJECT = "reject", _("reject")

    tool_name = models.CharField(_("tool name"), max_length=KEY_LENGTH)
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
    arguments = models.JSONField(
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

    class Meta:
        verbose_name = _("approval policy")
        verbose_name_plural = _("approval policies")
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(decision__in=["approve", "reject"]),
                name="agentstate_policy_decision_valid",
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

    COUNTERS = ("requests", "input_tokens", "output_tokens", "total_tokens")

    class Period(models.TextChoices):
        DAY = "day", _("day")
        MONTH = "month", _("month")

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
                condition=Q(period__in=["", "day", "month"]), name="agentstate_budget_period_valid"
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
    object_id = models.CharField(_("object id"), max_length=2 * KEY_LENGTH + 1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("object created by"),
        db_index=False,
    )
    owner = models.CharField(_("object owner"), max_length=KEY_LENGTH, blank=True)
    details = models.JSONField(_("details"), default=dict, blank=True)
    created_at = models.DateTimeField(_("created at"), db_default=Now(), db_index=True)

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
            where_set("created_by", "agentstate_event_created_by"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.object_type}:{self.object_id}"


class Webhook(models.Model):
    """A URL that wants events: every event of its ``kinds`` (none: all) is delivered
    to it, signed with its ``secret`` the Standard Webhooks way."""

    url = models.URLField(_("URL"), max_length=2000)
    secret = models.CharField(_("secret"), max_length=100, editable=False)
    kinds = models.JSONField(
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

    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        DELIVERED = "delivered", _("delivered")
        FAILED = "failed", _("failed")

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
                condition=Q(status__in=["pending", "delivered", "failed"]),
                name="agentstate_delivery_status_valid",
            ),
        ]
        indexes = [
            # What the sender picks up: pending deliveries that are due.
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status="pending"),
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


class Thread(models.Model):
    """A LangGraph thread (``agentstate.contrib.langgraph.AgentStateSaver``): its
    checkpoints, their channel values and pending writes hang off it, and
    ``updated_at`` (every put) is what ``AGENTSTATE["THREAD_TTL"]`` measures."""

    thread_id = models.CharField(_("thread id"), max_length=KEY_LENGTH)
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    updated_at = models.DateTimeField(_("updated at"), db_default=Now())

    class Meta:
        verbose_name = _("LangGraph thread")
        verbose_name_plural = _("LangGraph threads")
        ordering = ["-updated_at", "-pk"]
        # a constraint, not unique=True: on PostgreSQL that adds a LIKE index nothing uses
        constraints = [models.UniqueConstraint(fields=["thread_id"], name="agentstate_thread_id")]
        indexes = [models.Index(fields=["updated_at"], name="agentstate_thread_updated")]

    def __str__(self) -> str:
        return self.thread_id


class Checkpoint(models.Model):
    """One LangGraph checkpoint of a thread's namespace, without its channel values
    (``CheckpointBlob``): ``checkpoint`` is the rest of it as JSON, ``metadata``
    its metadata. ``forked``: its parent already had a child when it was put
    (or it is a second root), so the thread's history branched here."""

    thread = models.ForeignKey(
        Thread,
        on_delete=models.CASCADE,
        related_name="checkpoints",
        verbose_name=_("thread"),
        db_index=False,
        # no constraint in the database: the saver makes or finds the thread's row in
        # the statement that writes these, and deletes them with it; a checked key
        # would lock the thread's row once per row written (a MultiXact when a put and
        # a task's writes hold it at once)
        db_constraint=False,
    )
    checkpoint_ns = models.TextField(_("namespace"), blank=True)
    checkpoint_id = models.CharField(_("checkpoint id"), max_length=64)
    parent_checkpoint_id = models.CharField(
        _("parent checkpoint id"), max_length=64, null=True, blank=True
    )
    checkpoint = models.JSONField(_("checkpoint"))
    metadata = models.JSONField(_("metadata"), default=dict, blank=True)
    run_id = models.CharField(_("run id"), max_length=KEY_LENGTH, null=True, blank=True)
    step = models.IntegerField(_("step"), null=True, blank=True)
    forked = models.BooleanField(_("forked"), default=False)
    created_at = models.DateTimeField(_("created at"), db_default=Now())

    class Meta:
        verbose_name = _("LangGraph checkpoint")
        verbose_name_plural = _("LangGraph checkpoints")
        ordering = ["-checkpoint_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id"],
                name="agentstate_checkpoint_id",
            ),
        ]
        indexes = [
            # what a put looks up: the children of its parent (a fork when there is one)
            models.Index(
                fields=["thread", "checkpoint_ns", "parent_checkpoint_id"],
                name="agentstate_checkpoint_parent",
            ),
            where_set("run_id", "agentstate_checkpoint_run"),
        ]

    def __str__(self) -> str:
        return self.checkpoint_id


class CheckpointBlob(models.Model):
    """A channel's value at one version, serialized by the saver's serde
    (``type`` "empty": the channel was emptied, no value)."""

    thread = models.ForeignKey(
        Thread,
        on_delete=models.CASCADE,
        related_name="blobs",
        verbose_name=_("thread"),
        db_index=False,
        # no constraint in the database: the saver makes or finds the thread's row in
        # the statement that writes these, and deletes them with it; a checked key
        # would lock the thread's row once per row written (a MultiXact when a put and
        # a task's writes hold it at once)
        db_constraint=False,
    )
    checkpoint_ns = models.TextField(_("namespace"), blank=True)
    channel = models.CharField(_("channel"), max_length=KEY_LENGTH)
    version = models.CharField(_("version"), max_length=KEY_LENGTH)
    type = models.CharField(_("type"), max_length=32)
    blob = models.BinaryField(_("value"), null=True, blank=True)

    class Meta:
        verbose_name = _("LangGraph channel value")
        verbose_name_plural = _("LangGraph channel values")
        ordering = ["channel", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "channel", "version"],
                name="agentstate_blob_version",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel}@{self.version}"


class CheckpointWrite(models.Model):
    """A pending write of a task against a checkpoint, serialized by the saver's serde."""

    thread = models.ForeignKey(
        Thread,
        on_delete=models.CASCADE,
        related_name="writes",
        verbose_name=_("thread"),
        db_index=False,
        # no constraint in the database: the saver makes or finds the thread's row in
        # the statement that writes these, and deletes them with it; a checked key
        # would lock the thread's row once per row written (a MultiXact when a put and
        # a task's writes hold it at once)
        db_constraint=False,
    )
    checkpoint_ns = models.TextField(_("namespace"), blank=True)
    checkpoint_id = models.CharField(_("checkpoint id"), max_length=64)
    task_id = models.CharField(_("task id"), max_length=KEY_LENGTH)
    task_path = models.TextField(_("task path"), blank=True)
    idx = models.IntegerField(_("index"))
    channel = models.CharField(_("channel"), max_length=KEY_LENGTH)
    type = models.CharField(_("type"), max_length=32)
    blob = models.BinaryField(_("value"), null=True, blank=True)

    class Meta:
        verbose_name = _("LangGraph pending write")
        verbose_name_plural = _("LangGraph pending writes")
        ordering = ["task_path", "task_id", "idx"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
                name="agentstate_write_task_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}[{self.idx}] {self.channel}"
