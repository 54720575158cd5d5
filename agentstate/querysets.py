"""Filters the services, the sweep and the admin share, as QuerySet methods."""

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Self

from django.db import models
from django.db.models import Case, CharField, F, Q, Value, When
from django.db.models.expressions import Combinable
from django.db.models.functions import Now

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser


class PausedRunQuerySet(models.QuerySet):
    def pending(self) -> Self:
        return self.filter(status="pending")

    def created_or_owned_by(self, user: "AbstractBaseUser") -> Self:
        """The pauses ``user`` created, or owns (its username is their owner)."""
        return self.filter(Q(created_by=user) | Q(owner=user.get_username()))

    def past_expiry(self) -> Self:
        """Past ``expires_at`` by the database clock."""
        return self.filter(expires_at__lte=Now())

    def finished_before(self, cutoff: datetime | Combinable) -> Self:
        """Resolved or expired pauses last changed before ``cutoff``."""
        return self.filter(
            models.Q(status="resolved", resolved_at__lt=cutoff)
            | models.Q(status="expired", expires_at__lt=cutoff)
        )


def past_ttl(ttl: timedelta) -> Q:
    """Pending requests older than ``ttl`` by the database clock: expired, swept or not."""
    return Q(status="pending", created_at__lte=Now() - ttl)


def current_status(ttl: timedelta) -> Case:
    """A request's status as ``decide`` sees it: a pending one past ``ttl`` is ``expired``."""
    return Case(
        When(past_ttl(ttl), then=Value("expired")), default=F("status"), output_field=CharField()
    )


class ApprovalRequestQuerySet(models.QuerySet):
    def pending(self) -> Self:
        return self.filter(status="pending")

    def filed_by(self, user: "AbstractBaseUser") -> Self:
        """The requests ``user`` filed."""
        return self.filter(created_by=user)

    def with_current_status(self, ttl: timedelta) -> Self:
        """Annotated with ``current_status`` (see ``current_status``)."""
        return self.annotate(current_status=current_status(ttl))

    def older_than(self, age: timedelta) -> Self:
        """Created more than ``age`` (a timedelta) ago by the database clock."""
        return self.filter(created_at__lte=Now() - age)


class EventQuerySet(models.QuerySet):
    def visible_to(self, user: "AbstractBaseUser", object_types: Iterable[str] = ()) -> Self:
        """Events about objects ``user`` created or owns (``created_by`` and ``owner``
        are copied onto the event, so they outlive the object), or of ``object_types``."""
        return self.filter(
            Q(created_by=user)
            | Q(owner=user.get_username())
            | Q(object_type__in=list(object_types))
        )
