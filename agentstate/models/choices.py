"""The status and decision values, written once: the models take them as their
``Status`` and ``Decision``, and ``agentstate.models.querysets`` (which the models
import) filters by them. Imports nothing of agentstate."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class PauseStatus(models.TextChoices):
    """``PausedRun.Status``: pending, then claimed once, then resolved; or expired."""

    PENDING = "pending", _("pending")
    CLAIMED = "claimed", _("claimed")
    RESOLVED = "resolved", _("resolved")
    EXPIRED = "expired", _("expired")


class RequestStatus(models.TextChoices):
    """``ApprovalRequest.Status``: pending, then approved, rejected or expired."""

    PENDING = "pending", _("pending")
    APPROVED = "approved", _("approved")
    REJECTED = "rejected", _("rejected")
    EXPIRED = "expired", _("expired")


class Decision(models.TextChoices):
    """``ApprovalCall.Decision`` and ``ApprovalPolicy.Decision``."""

    APPROVE = "approve", _("approve")
    REJECT = "reject", _("reject")


class DeliveryStatus(models.TextChoices):
    """``Delivery.Status``: pending until delivered, or failed for good."""

    PENDING = "pending", _("pending")
    DELIVERED = "delivered", _("delivered")
    FAILED = "failed", _("failed")


class BudgetPeriod(models.TextChoices):
    """``Budget.Period``: how often a user's budget resets (stored ``""``: never)."""

    DAY = "day", _("day")
    MONTH = "month", _("month")


class OnDeadline(models.TextChoices):
    """``ApprovalRule.OnDeadline``: what a request's deadline does to it, still pending."""

    EXPIRE = "expire", _("expire")
    REJECT = "reject", _("reject")
    APPROVE = "approve", _("approve")
