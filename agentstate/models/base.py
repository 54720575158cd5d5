"""What the models of every area share: the length of a key, and an index of a
nullable user key."""

from django.db import models
from django.db.models import Q

KEY_LENGTH = 255
RUN_ID_LENGTH = 128


def where_set(field: str, name: str) -> models.Index:
    """An index of a nullable user key over the rows that have one: what deleting a
    user looks up, and no entry for the many rows written without a user."""
    return models.Index(fields=[field], condition=Q(**{f"{field}__isnull": False}), name=name)
