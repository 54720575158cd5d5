"""Context variables on PostgreSQL: ``sql/10_context.sql``."""

from collections.abc import Callable
from typing import Any, cast

from agentstate.db import Json
from agentstate.types import Owner


def _owner(owner: Owner) -> dict[str, Any]:
    """The owner as the functions take it: its id or its username, the other ``None``."""
    return {
        "p_owner_id": None if isinstance(owner, str) else owner,
        "p_owner_name": owner if isinstance(owner, str) else None,
    }


class ContextOperations:
    call: Callable[..., dict[str, Any]]

    def put(
        self,
        scope: str,
        name: str,
        value: Any,
        if_version: int | None,
        owner: Owner,
        actor: str,
    ) -> int:
        result = self.call(
            "put",
            p_scope=scope,
            p_name=name,
            p_value=Json(value),
            p_if_version=if_version,
            **_owner(owner),
            p_actor=actor,
        )
        return cast(int, result["version"])

    def get(self, scope: str, names: list[str] | None, owner: Owner) -> dict[str, Any]:
        return dict(self.call("get", p_scope=scope, p_names=names, **_owner(owner))["values"])

    def push(self, scope: str, name: str, value: Any, owner: Owner, actor: str) -> tuple[int, int]:
        result = self.call(
            "push", p_scope=scope, p_name=name, p_value=Json(value), **_owner(owner), p_actor=actor
        )
        return result["length"], result["version"]

    def extend(
        self, scope: str, name: str, values: list[Any], owner: Owner, actor: str
    ) -> tuple[int, int]:
        result = self.call(
            "extend",
            p_scope=scope,
            p_name=name,
            p_values=Json(values),
            **_owner(owner),
            p_actor=actor,
        )
        return result["length"], result["version"]

    def get_list(
        self, scope: str, name: str, last: int | None, owner: Owner
    ) -> tuple[list[Any], int]:
        result = self.call("get_list", p_scope=scope, p_name=name, p_last=last, **_owner(owner))
        return list(result["values"]), result["length"]

    def pop(self, scope: str, name: str, lifo: bool, owner: Owner, actor: str) -> Any:
        return self.call(
            "pop", p_scope=scope, p_name=name, p_lifo=lifo, **_owner(owner), p_actor=actor
        )["value"]

    def delete(self, scope: str, name: str, owner: Owner) -> None:
        self.call("delete", p_scope=scope, p_name=name, **_owner(owner))

    def delete_scope(self, scope: str, owner: Owner) -> None:
        self.call("delete_scope", p_scope=scope, **_owner(owner))
