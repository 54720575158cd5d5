"""LangGraph's store on PostgreSQL: ``sql/55_langgraph_store.sql``, a get (a batch of
them) and a put one call each."""

from collections.abc import Callable
from typing import Any, cast

from agentstate.db import Json


class StoreOperations:
    call: Callable[..., dict[str, Any]]

    def store_get(
        self, items: list[tuple[str, str, bool]], actor: str
    ) -> list[dict[str, Any] | None]:
        result = self.call("store_get", p_items=Json(items), p_actor=actor)
        return cast(list[dict[str, Any] | None], result["items"])

    def store_put(self, scope: str, name: str, value: dict[str, Any], actor: str) -> None:
        self.call("store_put", p_scope=scope, p_name=name, p_value=Json(value), p_actor=actor)
