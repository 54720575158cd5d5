"""LangGraph's store on the ORM: a get (a batch of them) and a put, one transaction each,
by the database's clock (``database_epoch``)."""

from datetime import UTC, datetime
from typing import Any, TypeGuard, cast

from django.db.models import F
from django.db.models.functions import Now

from agentstate.backends.events import json_time
from agentstate.db import database_epoch
from agentstate.models import Element, Variable

from .context import ContextOperations


def number(value: Any) -> TypeGuard[int | float]:
    """Whether ``value`` is a JSON number (a ``bool`` is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def live(value: Any, now: float) -> bool:
    """Whether an item's value is live at ``now``: no ``expires_at``, or one after ``now``."""
    expires = value.get("expires_at") if isinstance(value, dict) else None
    return expires > now if number(expires) else True


def ttl_of(value: Any) -> float | None:
    """An item's TTL in minutes (``None``: none)."""
    ttl = value.get("ttl") if isinstance(value, dict) else None
    return ttl if number(ttl) and ttl != 0 else None


class StoreOperations(ContextOperations):
    def store_get(
        self, items: list[tuple[str, str, bool]], actor: str
    ) -> list[dict[str, Any] | None]:
        return self.atomic(self._store_get, items, actor)

    def _store_get(
        self, items: list[tuple[str, str, bool]], actor: str
    ) -> list[dict[str, Any] | None]:
        now = database_epoch(self.alias)
        rows = self.rows(Variable).filter(
            scope__owner__isnull=True,
            scope__key__in={scope for scope, _, _ in items},
            name__in={name for _, name, _ in items},
            is_list=False,
        )
        if any(refresh for _, _, refresh in items):
            rows = self.lock_own(rows)
        found = {
            (scope, name): (pk, value)
            for pk, scope, name, value in rows.values_list("pk", "scope__key", "name", "value")
        }
        refreshed: set[int] = set()
        values: list[dict[str, Any] | None] = []
        for scope, name, refresh in items:
            pk, value = found.get((scope, name), (None, None))
            if pk is None or not live(value, now):
                values.append(None)
                continue
            ttl = ttl_of(value)
            if refresh and ttl is not None and pk not in refreshed:
                value = {**cast(dict[str, Any], value), "expires_at": now + 60 * ttl}
                self.rows(Variable).filter(pk=pk).update(
                    value=value,
                    version=F("version") + 1,
                    updated_at=Now(),
                    updated_by=actor,
                )
                refreshed.add(pk)
                found[(scope, name)] = (pk, value)
            values.append(value)
        return values

    def store_put(self, scope: str, name: str, value: dict[str, Any], actor: str) -> None:
        self.atomic(self._store_put, scope, name, value, actor)

    def _store_put(self, scope: str, name: str, value: dict[str, Any], actor: str) -> None:
        now = database_epoch(self.alias)
        stamp = json_time(datetime.fromtimestamp(now, UTC))
        value = {**value, "created_at": stamp, "updated_at": stamp}
        if number(value.get("ttl")):
            value["expires_at"] = now + 60 * value["ttl"]
        variable = self._lock_or_create(scope, None, name)
        held = variable.value
        if variable.is_list:
            self.rows(Element).filter(variable=variable).delete()
        elif variable.version and isinstance(held, dict) and held.get("created_at") is not None:
            value = {**value, "created_at": held["created_at"]}
        variable.is_list, variable.value, variable.head, variable.tail = False, value, 0, 0
        self._save(variable, actor)
