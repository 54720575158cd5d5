"""LangGraph's store on the ORM: a get (a batch of them) and a put, one transaction each."""

from typing import Any, cast

from django.db.models import F
from django.utils import timezone

from agentstate.models import Element, Variable

from .context import ContextOperations


def live(value: Any, now: float) -> bool:
    """Whether an item's value is live at ``now``: no ``expires_at``, or one after ``now``."""
    expires = value.get("expires_at") if isinstance(value, dict) else None
    if isinstance(expires, bool) or not isinstance(expires, int | float):
        return True
    return expires > now


def ttl_of(value: Any) -> float | None:
    """An item's TTL in minutes (``None``: none)."""
    ttl = value.get("ttl") if isinstance(value, dict) else None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl == 0:
        return None
    return ttl


class StoreOperations(ContextOperations):
    def store_get(
        self, items: list[tuple[str, str, bool]], now: float, actor: str
    ) -> list[dict[str, Any] | None]:
        return self.atomic(self._store_get, items, now, actor)

    def _store_get(
        self, items: list[tuple[str, str, bool]], now: float, actor: str
    ) -> list[dict[str, Any] | None]:
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
                    updated_at=timezone.now(),
                    updated_by=actor,
                )
                refreshed.add(pk)
                found[(scope, name)] = (pk, value)
            values.append(value)
        return values

    def store_put(self, scope: str, name: str, value: dict[str, Any], actor: str) -> None:
        self.atomic(self._store_put, scope, name, value, actor)

    def _store_put(self, scope: str, name: str, value: dict[str, Any], actor: str) -> None:
        variable = self._lock_or_create(scope, None, name)
        held = variable.value
        if variable.is_list:
            self.rows(Element).filter(variable=variable).delete()
        elif variable.version and isinstance(held, dict) and held.get("created_at") is not None:
            value = {**value, "created_at": held["created_at"]}
        variable.is_list, variable.value, variable.head, variable.tail = False, value, 0, 0
        self._save(variable, actor)
