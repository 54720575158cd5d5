"""What the models of every area share: the length of a key, an index of a
nullable user key, and the shapes of the status constraints."""

from collections.abc import Sequence

from django.db import models
from django.db.models import Q

KEY_LENGTH = 255
RUN_ID_LENGTH = 128


def where_set(field: str, name: str, *also: str) -> models.Index:
    """An index of a nullable user key over the rows that have one: what deleting a
    user looks up, and no entry for the many rows written without a user; ``also``:
    columns after it, for what else reads through it."""
    return models.Index(
        fields=[field, *also], condition=Q(**{f"{field}__isnull": False}), name=name
    )


def set_exactly_in(field: str, statuses: Sequence[str], name: str) -> models.CheckConstraint:
    """A status transition the database holds: ``field`` is set exactly on the rows
    whose ``status`` is one of ``statuses`` (those that went through it)."""
    within = Q(status__in=list(statuses))
    return models.CheckConstraint(
        condition=(within & Q(**{f"{field}__isnull": False}))
        | (~within & Q(**{f"{field}__isnull": True})),
        name=name,
    )


def set_only_in(field: str, statuses: Sequence[str], name: str) -> models.CheckConstraint:
    """``field`` is empty on every row whose ``status`` is not one of ``statuses``."""
    return models.CheckConstraint(
        condition=Q(**{f"{field}__isnull": True}) | Q(status__in=list(statuses)), name=name
    )
