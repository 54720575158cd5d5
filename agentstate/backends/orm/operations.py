"""What every part of the ORM backend works with: its database, its transactions, its rows."""

from collections.abc import Callable
from typing import ParamSpec, TypeVar, overload

from django.contrib.auth import get_user_model
from django.db.models import Model, QuerySet

from agentstate.db import atomic
from agentstate.models import ApprovalRequest, PausedRun, Run
from agentstate.models.querysets import ApprovalRequestQuerySet, PausedRunQuerySet, RunQuerySet

P = ParamSpec("P")
R = TypeVar("R")
M = TypeVar("M", bound=Model)


class Operations:
    """The base of each part's operations; ``ORMBackend`` combines them."""

    alias: str

    def atomic(self, func: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return atomic(self.alias, func, *args, **kwargs)

    @overload
    def rows(self, model: type[PausedRun]) -> PausedRunQuerySet[PausedRun]: ...
    @overload
    def rows(self, model: type[ApprovalRequest]) -> ApprovalRequestQuerySet[ApprovalRequest]: ...
    @overload
    def rows(self, model: type[Run]) -> RunQuerySet[Run]: ...
    @overload
    def rows(self, model: type[M]) -> QuerySet[M]: ...
    def rows(self, model: type[Model]) -> QuerySet[Model]:
        """The rows of ``model`` (its default manager's queryset) on this database."""
        return model._default_manager.using(self.alias)

    def user_pk(self, username: str) -> int | None:
        """The primary key of the site's user named ``username``, or ``None``: each
        operation refuses an unknown name in its own words."""
        user_model = get_user_model()
        found: int | None = (
            self.rows(user_model)
            .filter(**{user_model.USERNAME_FIELD: username})
            .values_list("pk", flat=True)
            .first()
        )
        return found
