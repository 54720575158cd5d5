"""Context variables on PostgreSQL: ``sql/10_context.sql``."""

from typing import Any

from agentstate.db import Json


class ContextOperations:
    call: Any

    def put(self, scope, name, value, if_version, owner_id, actor):
        return self.call("put", scope, name, Json(value), if_version, owner_id, actor)["version"]

    def get(self, scope, names, owner_id):
        return dict(self.call("get", scope, names, owner_id)["values"])

    def push(self, scope, name, value, owner_id, actor):
        result = self.call("push", scope, name, Json(value), owner_id, actor)
        return result["length"], result["version"]

    def pop(self, scope, name, lifo, owner_id, actor):
        return self.call("pop", scope, name, lifo, owner_id, actor)["value"]

    def delete(self, scope, name, owner_id):
        self.call("delete", scope, name, owner_id)

    def delete_scope(self, scope, owner_id):
        self.call("delete_scope", scope, owner_id)
