"""The sweep on PostgreSQL: ``sql/40_sweep.sql``, each batch one call."""

from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

from agentstate.backends.base import Changed
from agentstate.backends.events import from_json
from agentstate.types import STORE_PREFIX, SWEEPER


class SweepOperations:
    alias: str
    call: Callable[..., dict[str, Any]]

    def _expired(self, result: dict[str, Any]) -> Changed[int]:
        return Changed(
            result["count"], from_json(result["events"], self.alias), result.get("after")
        )

    def expire_pauses(self, size: int, after: Any = None, answer: bool = True) -> Changed[int]:
        expires_at, pk = after or (None, None)
        return self._expired(
            self.call(
                "expire_pauses",
                p_size=size,
                p_actor=SWEEPER.name,
                p_after_expires=expires_at,
                p_after_id=pk,
                p_events=answer,
            )
        )

    def expire_approval_requests(self, size: int, approval_ttl: timedelta) -> Changed[int]:
        return self._expired(
            self.call(
                "expire_approval_requests", p_size=size, p_ttl=approval_ttl, p_actor=SWEEPER.name
            )
        )

    def purge_pauses(self, size: int, retention: timedelta) -> int:
        return cast(int, self.call("purge_pauses", p_size=size, p_retention=retention)["count"])

    def purge_events(self, size: int, retention: timedelta) -> int:
        return cast(int, self.call("purge_events", p_size=size, p_retention=retention)["count"])

    def purge_store_items(self, size: int, after: Any = None) -> Changed[int]:
        scope, name = after or (None, None)
        result = self.call(
            "purge_store_items",
            p_size=size,
            p_prefix=STORE_PREFIX,
            p_after_scope=scope,
            p_after_name=name,
        )
        return Changed(result["count"], [], result["after"])
