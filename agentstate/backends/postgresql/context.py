"""Context variables on PostgreSQL: ``sql/10_context.sql``."""

from typing import Any

from agentstate.db import Json


def _owner(owner: int | str | None) -> tuple[int | None, str | None]:
    """The owner as the functions take it: ``(id, username)``, one of them set."""
    return (None, owner) if isinstance(owner, str) else (owner, None)


class ContextOperations:
    call: Any

    def put(self, scope, name, value, if_version, owner, actor):
        return self.call("put", scope, name, Json(value), if_version, *_owner(owner), actor)[
            "version"
        ]

    def get(self, scope, names, owner):
        return dict(self.call("get", scope, names, *_owner(owner))["values"])

    def push(self, scope, name, value, owner, actor):
        result = self.call("push", scope, name, Json(value), *_owner(owner), actor)
        return result["length"], result["version"]

    def pop(self, scope, name, lifo, owner, actor):
        return self.call("pop", scope, name, lifo, *_owner(owner), actor)["value"]

    def delete(self, scope, name, owner):
        self.call("delete", scope, name, *_owner(owner))

    def delete_scope(self, scope, owner):
        self.call("delete_scope", scope, *_owner(owner))
