"""The sweep on PostgreSQL: ``sql/40_sweep.sql``, each batch one call."""

from typing import Any

from agentstate.backends.base import SWEEPER, Changed
from agentstate.events import from_json


class SweepOperations:
    alias: str
    call: Any

    def _expired(self, result: dict[str, Any]) -> Changed:
        return Changed(result["count"], from_json(result["events"], self.alias))

    def expire_pauses(self, size):
        return self._expired(self.call("expire_pauses", size, SWEEPER.name))

    def expire_approval_requests(self, size, approval_ttl):
        return self._expired(
            self.call("expire_approval_requests", size, approval_ttl, SWEEPER.name)
        )

    def purge_pauses(self, size, retention):
        return self.call("purge_pauses", size, retention)["count"]

    def purge_events(self, size, retention):
        return self.call("purge_events", size, retention)["count"]
