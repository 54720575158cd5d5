"""What every part of the ORM backend works with: its database, its transactions, its rows."""

from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar, overload

from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import Model, QuerySet

from agentstate.db import atomic
from agentstate.models import ApprovalRequest, Event, PausedRun, Run
from agentstate.models.querysets import (
    ApprovalRequestQuerySet,
    EventQuerySet,
    PausedRunQuerySet,
    RunQuerySet,
)

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
    def rows(self, model: type[Event]) -> EventQuerySet[Event]: ...
    @overload
    def rows(self, model: type[M]) -> QuerySet[M]: ...
    def rows(self, model: type[Model]) -> QuerySet[Model]:
        """The rows of ``model`` (its default manager's queryset) on this database."""
        return model._default_manager.using(self.alias)

    def lock_no_key(self, rows: QuerySet[M]) -> QuerySet[M]:
        """``rows`` locked against changes and deletion, but not against rows that
        refer to them (``FOR NO KEY UPDATE``) where the database can say so
        (PostgreSQL); elsewhere ``FOR UPDATE``."""
        features = connections[self.alias].features
        return rows.select_for_update(no_key=features.has_select_for_no_key_update)

    def lock_own(self, rows: QuerySet[M], *, skip_locked: bool = False) -> QuerySet[M]:
        """``rows`` locked, not the rows of the tables they join (``FOR UPDATE OF``)
        where the database can say so; elsewhere (MySQL, MariaDB) those too."""
        features = connections[self.alias].features
        of = ("self",) if features.has_select_for_update_of else ()
        return rows.select_for_update(skip_locked=skip_locked, of=of)

    def upsert(
        self,
        model: type[M],
        rows: list[M],
        unique_fields: Sequence[str],
        update_fields: Sequence[str],
    ) -> None:
        """Insert ``rows``; one that meets an existing row of ``unique_fields`` updates
        its ``update_fields`` instead, and leaves it locked. MySQL and MariaDB name no
        conflict target (``ON DUPLICATE KEY UPDATE``): each model upserted here has
        no other unique key than its primary key and ``unique_fields``."""
        features = connections[self.alias].features
        self.rows(model).bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=unique_fields if features.supports_update_conflicts_with_target else None,
            update_fields=update_fields,
        )

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
