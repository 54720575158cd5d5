"""Filters the services, the sweep and the admin share, as QuerySet methods."""

from datetime import datetime, timedelta
from typing import Any, Self

from django.db import models
from django.db.models.functions import Now


class PausedRunQuerySet(models.QuerySet[Any]):
    def pending(self) -> Self:
        return self.filter(status="pending")

    def past_expiry(self) -> Self:
        """Past ``expires_at`` by the database clock."""
        return self.filter(expires_at__lte=Now())

    def finished_before(self, cutoff: datetime | models.Expression) -> Self:
        """Resolved or expired pauses last changed before ``cutoff``."""
        return self.filter(
            models.Q(status="resolved", resolved_at__lt=cutoff)
            | models.Q(status="expired", expires_at__lt=cutoff)
        )


class ApprovalRequestQuerySet(models.QuerySet[Any]):
    def pending(self) -> Self:
        return self.filter(status="pending")

    def older_than(self, age: timedelta) -> Self:
        """Created more than ``age`` (a timedelta) ago by the database clock."""
        return self.filter(created_at__lte=Now() - age)
