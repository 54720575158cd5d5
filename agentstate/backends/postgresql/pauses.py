"""Paused runs on PostgreSQL: ``sql/20_pauses.sql``, one call per operation."""

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from agentstate.backends.base import Changed
from agentstate.backends.events import from_json as events_from_json
from agentstate.db import Json, from_json
from agentstate.models import PausedRun
from agentstate.types import Actor, Reach


def reach_args(reach: Reach | None) -> tuple[int | None, str | None]:
    """A reach as the functions take it: ``(NULL, NULL)`` for every pause."""
    return (None, None) if reach is None else (reach.user_id, reach.username)


class PauseOperations:
    alias: str
    call: Callable[..., dict[str, Any]]

    def _changed(self, result: dict[str, Any]) -> Changed[PausedRun]:
        return Changed(
            from_json(PausedRun, result["pause"], self.alias),
            events_from_json(result["events"], self.alias),
        )

    def put_pause(
        self,
        chat_id: str,
        tool_call_id: str,
        owner: str,
        payload: Any,
        ttl: timedelta,
        question_id: uuid.UUID,
        reach: Reach | None,
        by: Actor,
    ) -> Changed[PausedRun]:
        return self._changed(
            self.call(
                "put_pause",
                chat_id,
                tool_call_id,
                owner,
                Json(payload),
                ttl,
                question_id,
                *reach_args(reach),
                by.user_id,
                by.name,
            )
        )

    def claim(
        self, chat_id: str, tool_call_id: str, owner: str, question_id: str, by: Actor
    ) -> Changed[PausedRun]:
        return self._changed(
            self.call("claim", chat_id, tool_call_id, owner, question_id, by.user_id, by.name)
        )

    def resolve(
        self, chat_id: str, tool_call_id: str, reach: Reach | None, by: Actor
    ) -> Changed[PausedRun]:
        return self._changed(
            self.call("resolve", chat_id, tool_call_id, *reach_args(reach), by.user_id, by.name)
        )

    def cancel(
        self, chat_id: str, tool_call_id: str, reach: Reach | None, by: Actor
    ) -> Changed[PausedRun]:
        return self._changed(
            self.call("cancel", chat_id, tool_call_id, *reach_args(reach), by.user_id, by.name)
        )
