"""Filters the services, the sweep and the admin share, as QuerySet methods.

Visibility (``created_or_owned_by``, ``filed_by``, ``created_by_user``,
``visible_to``, ``of_user``): the rows that are a user's own, whatever its
permissions; who may see more (a model permission) is the caller's rule.
"""

from collections.abc import Iterable
from datetime import timedelta
from typing import Any, Self

from django.contrib.auth import get_user_model
from django.db import models
from django.db.models import Case, CharField, F, Q, Value, When
from django.db.models.functions import Cast, Now

from agentstate.types import Reach

# The choices module only: the models import this one.
from .choices import PauseStatus, RequestStatus


class PausedRunQuerySet(models.QuerySet):
    def created_or_owned_by(self, user: Any) -> Self:
        """The pauses ``user`` created, or owns (its username is their owner)."""
        return self.filter(Q(created_by=user) | Q(owner=user.get_username()))

    def pending(self) -> Self:
        return self.filter(status=PauseStatus.PENDING)

    def with_current_status(self) -> Self:
        """Annotated with ``current_status``: a pending pause past its expiry reads
        ``expired``, by the database clock, so a listing agrees with what a claim
        would say before the sweeper has run."""
        return self.annotate(
            current_status=Case(
                When(
                    status=PauseStatus.PENDING,
                    expires_at__lte=Now(),
                    then=Value(PauseStatus.EXPIRED),
                ),
                default=F("status"),
                output_field=CharField(),
            )
        )

    def past_expiry(self) -> Self:
        """Past ``expires_at`` by the database clock."""
        return self.filter(expires_at__lte=Now())


def pause_in_status(status: str) -> Q:
    """The pauses whose current status (``PausedRunQuerySet.with_current_status``) is
    ``status``, written on the stored columns so that the (status, expires_at) index
    serves it."""
    if status == PauseStatus.PENDING:
        return Q(status=PauseStatus.PENDING, expires_at__gt=Now())
    if status == PauseStatus.EXPIRED:
        return Q(status=PauseStatus.EXPIRED) | Q(status=PauseStatus.PENDING, expires_at__lte=Now())
    return Q(status=status)


def past_ttl(ttl: timedelta) -> Q:
    """Pending requests past their deadline by the database clock (filed under no
    rule: older than ``ttl``): expired, swept or not."""
    return Q(status=RequestStatus.PENDING) & (
        Q(deadline__isnull=True, created_at__lte=Now() - ttl) | Q(deadline__lte=Now())
    )


def request_in_status(status: str, ttl: timedelta) -> Q:
    """The requests whose current status (``current_status``) is ``status``."""
    if status == RequestStatus.PENDING:
        return Q(status=RequestStatus.PENDING) & ~past_ttl(ttl)
    if status == RequestStatus.EXPIRED:
        return Q(status=RequestStatus.EXPIRED) | past_ttl(ttl)
    return Q(status=status)


def current_status(ttl: timedelta) -> Case:
    """A request's status as ``decide`` sees it: a pending one past ``ttl`` is ``expired``."""
    return Case(
        When(past_ttl(ttl), then=Value(RequestStatus.EXPIRED)),
        default=F("status"),
        output_field=CharField(),
    )


class ApprovalRequestQuerySet(models.QuerySet):
    def filed_by(self, user: Any) -> Self:
        """The requests ``user`` (a signed-in user) filed."""
        return self.filter(created_by=user)

    def pending(self) -> Self:
        return self.filter(status=RequestStatus.PENDING)

    def with_current_status(self, ttl: timedelta) -> Self:
        """Annotated with ``current_status`` (see ``current_status``)."""
        return self.annotate(current_status=current_status(ttl))

    def decidable_by(self, user: Any) -> Self:
        """The requests ``user`` may decide by their rule: not of a run it created
        unless allowed, and within their reviewers (or escalation group, once due)
        when they name one. Whether it may decide requests at all (the
        permission) is the caller's rule."""
        groups = user.groups.all() if hasattr(user, "groups") else []
        reviewer = (
            Q(reviewers__isnull=True)
            | Q(reviewers__in=groups)
            | Q(escalate_at__lte=Now(), escalate_to__in=groups)
        )
        return self.filter(reviewer).exclude(Q(allow_self_approval=False, run__created_by=user))

    def older_than(self, age: timedelta) -> Self:
        """Created more than ``age`` (a timedelta) ago by the database clock."""
        return self.filter(created_at__lte=Now() - age)


class RunQuerySet(models.QuerySet):
    def created_by_user(self, user: Any) -> Self:
        """The runs ``user`` (a user, or a user's id) created."""
        return self.filter(created_by=user)


class EventQuerySet(models.QuerySet):
    def visible_to(self, user: Any, object_types: Iterable[str] = ()) -> Self:
        """Events about objects ``user`` created or owns (``created_by`` and ``owner``
        are copied onto the event, so they outlive the object), or of ``object_types``."""
        return self.reached_by(Reach(user.pk, user.get_username(), tuple(object_types)))

    def reached_by(self, reach: Reach) -> Self:
        """``visible_to`` by a reach: the events about objects its user created
        (``user_id``; ``None``: none) or its username owns, or of its ``object_types``."""
        seen = Q(owner=reach.username) | Q(object_type__in=list(reach.object_types))
        if reach.user_id is not None:
            seen = Q(created_by_id=reach.user_id) | seen
        return self.filter(seen)

    def of_run(self, run_id: str) -> Self:
        """Events of the run ``run_id`` and of its approval requests (an event names
        its object by its id as text)."""
        requests = (
            self.model._meta.apps.get_model("agentstate", "ApprovalRequest")
            ._default_manager.using(self.db)
            .filter(run__run_id=run_id)
            .annotate(key=Cast("pk", CharField()))
            .values("key")
        )
        return self.filter(
            Q(object_type="run", object_id=run_id)
            | Q(object_type="approvalrequest", object_id__in=requests)
        )


class ApprovalPolicyQuerySet(models.QuerySet):
    def of_user(self, user: Any) -> Self:
        """The policies for the runs of ``user``: a user, or a username."""
        if isinstance(user, str):
            return self.filter(**{f"user__{get_user_model().USERNAME_FIELD}": user})
        return self.filter(user=user)
