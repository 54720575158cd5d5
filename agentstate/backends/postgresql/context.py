"""Context variables on PostgreSQL: ``sql/10_context.sql``."""

from collections.abc import Callable
from typing import Any, cast

from agentstate.db import Json
from agentstate.types import Owner


def _owner(owner: Owner) -> tuple[int | None, str | None]:
    """The owner as the functions take it: ``(id, username)``, one of them set."""
    return (None, owner) if isinstance(owner, str) else (owner, None)


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
        result = self.call("put", scope, name, Json(value), if_version, *_owner(owner), actor)
        return cast(int, result["version"])

    def get(self, scope: str, names: list[str] | None, owner: Owner) -> dict[str, Any]:
        return dict(self.call("get", scope, names, *_owner(owner))["values"])

    def push(self, scope: str, name: str, value: Any, owner: Owner, actor: str) -> tuple[int, int]:
        result = self.call("push", scope, name, Json(value), *_owner(owner), actor)
        return result["length"], result["version"]

    def extend(
        self, scope: str, name: str, values: list[Any], owner: Owner, actor: str
    ) -> tuple[int, int]:
        result = self.call("extend", scope, name, Json(values), *_owner(owner), actor)
        return result["length"], result["version"]

    def get_list(
        self, scope: str, name: str, last: int | None, owner: Owner
    ) -> tuple[list[Any], int]:
        result = self.call("get_list", scope, name, last, *_owner(owner))
        return list(result["values"]), result["length"]

    def pop(self, scope: str, name: str, lifo: bool, owner: Owner, actor: str) -> Any:
        return self.call("pop", scope, name, lifo, *_owner(owner), actor)["value"]

    def delete(self, scope: str, name: str, owner: Owner) -> None:
        self.call("delete", scope, name, *_owner(owner))

    def delete_scope(self, scope: str, owner: Owner) -> None:
        self.call("delete_scope", scope, *_owner(owner))
