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


def reach_args(reach: Reach | None) -> dict[str, Any]:
    """A reach as the functions take it: both ``NULL`` for every pause."""
    return {
        "p_reach_user": None if reach is None else reach.user_id,
        "p_reach_name": None if reach is None else reach.username,
    }


def by_args(by: Actor) -> dict[str, Any]:
    """Who makes the change, as the functions take it."""
    return {"p_user_id": by.user_id, "p_actor": by.name}


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
                p_chat=chat_id,
                p_call=tool_call_id,
                p_owner=owner,
                p_payload=Json(payload),
                p_ttl=ttl,
                p_question=question_id,
                **reach_args(reach),
                **by_args(by),
            )
        )

    def claim(
        self, chat_id: str, tool_call_id: str, owner: str, question_id: str, by: Actor
    ) -> Changed[PausedRun]:
        return self._changed(
            self.call(
                "claim",
                p_chat=chat_id,
                p_call=tool_call_id,
                p_owner=owner,
                p_question=question_id,
                **by_args(by),
            )
        )

    def resolve(
        self, chat_id: str, tool_call_id: str, reach: Reach | None, by: Actor
    ) -> Changed[PausedRun]:
        return self._changed(
            self.call(
                "resolve", p_chat=chat_id, p_call=tool_call_id, **reach_args(reach), **by_args(by)
            )
        )

    def cancel(
        self, chat_id: str, tool_call_id: str, reach: Reach | None, by: Actor
    ) -> Changed[PausedRun]:
        return self._changed(
            self.call(
                "cancel", p_chat=chat_id, p_call=tool_call_id, **reach_args(reach), **by_args(by)
            )
        )
