"""Paused runs on the ORM: a transaction per operation, the pause's row locked first.

Every operation locks the row of ``(chat_id, tool_call_id)`` (``SELECT ...
FOR UPDATE``; SQLite's IMMEDIATE transactions serialize writers instead)
and then reads its status, so of any number of concurrent claims exactly one
finds it pending. Expiry is the database clock's (``Now()``).
"""

import uuid
from datetime import timedelta
from typing import Any

from django.db.models import DateTimeField, ExpressionWrapper, Q, Value
from django.db.models.functions import Now

from agentstate.backends import events
from agentstate.backends.base import Changed, Page, PauseFilters
from agentstate.db import window_page
from agentstate.exceptions import (
    AlreadyClaimed,
    AlreadyResolved,
    NotClaimed,
    NotPending,
    PauseExpired,
    PauseNotFound,
    QuestionSuperseded,
)
from agentstate.models import Event, PausedRun
from agentstate.models.querysets import pause_in_status
from agentstate.types import Actor, Reach

from .operations import Operations

Status = PausedRun.Status
# The filters of a listing that compare a column with the value given.
EQUAL = ("owner", "chat_id", "tool_call_id")


def reaches(reach: Reach | None, pause: PausedRun) -> bool:
    """Whether ``pause`` is one of ``reach``'s: created by its user or owned by its name."""
    if reach is None or pause.owner == reach.username:
        return True
    return reach.user_id is not None and pause.created_by_id == reach.user_id


class PauseOperations(Operations):
    def _locked_pause(self, chat_id: str, tool_call_id: str) -> PausedRun | None:
        return (
            self.rows(PausedRun)
            .select_for_update()
            .filter(chat_id=chat_id, tool_call_id=tool_call_id)
            .first()
        )

    def _reached_pause(self, chat_id: str, tool_call_id: str, reach: Reach | None) -> PausedRun:
        """The pause's row, locked; a missing one or one outside ``reach``: not found."""
        pause = self._locked_pause(chat_id, tool_call_id)
        if pause is None or not reaches(reach, pause):
            raise PauseNotFound.of(chat_id=chat_id, tool_call_id=tool_call_id)
        return pause

    def _pause_event(self, kind: str, pause: PausedRun, by: Actor, **details: Any) -> Event:
        (event,) = events.save(
            self.alias,
            [
                events.new(
                    kind,
                    PausedRun,
                    str(pause),
                    by,
                    created_by_id=pause.created_by_id,
                    owner=pause.owner,
                    details={"question_id": str(pause.question_id), **details},
                )
            ],
        )
        return event

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
        return self.atomic(
            self._put_pause, chat_id, tool_call_id, owner, payload, ttl, question_id, reach, by
        )

    def _put_pause(
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
        fields: dict[str, Any] = {
            "owner": owner,
            "created_by_id": by.user_id,
            "question_id": question_id,
            "status": Status.PENDING,
            "payload": payload,
            "created_at": Now(),
            "expires_at": ExpressionWrapper(Now() + Value(ttl), output_field=DateTimeField()),
            "claimed_at": None,
            "claimed_by": "",
            "resolved_at": None,
        }
        earlier = self._locked_pause(chat_id, tool_call_id)
        while earlier is None:
            self.rows(PausedRun).bulk_create(
                [PausedRun(chat_id=chat_id, tool_call_id=tool_call_id, **fields)],
                ignore_conflicts=True,
            )
            # Inserted now or by a concurrent first put, and locked; gone only when
            # a cancel removed that put's pause meanwhile: then insert again.
            pause = self._locked_pause(chat_id, tool_call_id)
            if pause is not None and pause.question_id == question_id:  # inserted
                return Changed(pause, [self._pause_created(pause, by)])
            earlier = pause  # a concurrent first put's, replaced like any other
        if not reaches(reach, earlier):
            raise PauseNotFound.of(chat_id=chat_id, tool_call_id=tool_call_id)
        self.rows(PausedRun).filter(pk=earlier.pk).update(**fields)
        pause = self.rows(PausedRun).get(pk=earlier.pk)
        return Changed(pause, [self._pause_created(pause, by, replaced=earlier.status)])

    def _pause_created(self, pause: PausedRun, by: Actor, **replaced: str) -> Event:
        expires_at = events.json_time(pause.expires_at)
        return self._pause_event("pause.created", pause, by, expires_at=expires_at, **replaced)

    def claim(
        self, chat_id: str, tool_call_id: str, owner: str, question_id: str, by: Actor
    ) -> Changed[PausedRun]:
        return self.atomic(self._claim_pause, chat_id, tool_call_id, owner, question_id, by)

    def _claim_pause(
        self, chat_id: str, tool_call_id: str, owner: str, question_id: str, by: Actor
    ) -> Changed[PausedRun]:
        pause = self._locked_pause(chat_id, tool_call_id)
        if pause is None or pause.owner != owner:
            raise PauseNotFound.of(chat_id=chat_id, tool_call_id=tool_call_id)
        if str(pause.question_id) != question_id:
            raise QuestionSuperseded.of()
        if pause.status == Status.CLAIMED:
            raise AlreadyClaimed.of()
        if pause.status == Status.RESOLVED:
            raise AlreadyResolved.of()
        claimed = (
            self.rows(PausedRun)
            .filter(pk=pause.pk, status=Status.PENDING, expires_at__gt=Now())
            .update(status=Status.CLAIMED, claimed_at=Now(), claimed_by=by.name)
        )
        if not claimed:
            raise PauseExpired.of()
        pause.refresh_from_db(using=self.alias, fields=["status", "claimed_at", "claimed_by"])
        return Changed(pause, [self._pause_event("pause.claimed", pause, by)])

    def resolve(
        self, chat_id: str, tool_call_id: str, reach: Reach | None, by: Actor
    ) -> Changed[PausedRun]:
        return self.atomic(self._resolve_pause, chat_id, tool_call_id, reach, by)

    def _resolve_pause(
        self, chat_id: str, tool_call_id: str, reach: Reach | None, by: Actor
    ) -> Changed[PausedRun]:
        pause = self._reached_pause(chat_id, tool_call_id, reach)
        if pause.status != Status.CLAIMED:
            status = pause.status
            past = self.rows(PausedRun).filter(pk=pause.pk, expires_at__lte=Now())
            if status == Status.PENDING and past.exists():  # expired, swept or not
                status = Status.EXPIRED
            raise NotClaimed.of(status=status)
        self.rows(PausedRun).filter(pk=pause.pk).update(status=Status.RESOLVED, resolved_at=Now())
        pause.refresh_from_db(using=self.alias, fields=["status", "resolved_at"])
        return Changed(pause, [self._pause_event("pause.resolved", pause, by)])

    def cancel(
        self, chat_id: str, tool_call_id: str, reach: Reach | None, by: Actor
    ) -> Changed[PausedRun]:
        return self.atomic(self._cancel_pause, chat_id, tool_call_id, reach, by)

    def _cancel_pause(
        self, chat_id: str, tool_call_id: str, reach: Reach | None, by: Actor
    ) -> Changed[PausedRun]:
        pause = self._reached_pause(chat_id, tool_call_id, reach)
        removed, _ = (
            self.rows(PausedRun)
            .filter(pk=pause.pk, status=Status.PENDING, expires_at__gt=Now())
            .delete()
        )
        if not removed:  # a pending pause past its expiry is expired, swept or not
            status = Status.EXPIRED if pause.status == Status.PENDING else pause.status
            raise NotPending.of(status=status)
        return Changed(pause, [self._pause_event("pause.cancelled", pause, by)])

    def pauses_page(
        self, filters: PauseFilters, reach: Reach | None, offset: int, limit: int
    ) -> Page[PausedRun]:
        pauses = self.rows(PausedRun).with_current_status()
        if reach is not None:  # as ``reaches`` has it
            reached = Q(owner=reach.username)
            if reach.user_id is not None:
                reached |= Q(created_by_id=reach.user_id)
            pauses = pauses.filter(reached)
        pauses = pauses.filter(**{name: filters[name] for name in EQUAL if name in filters})
        if "status" in filters:
            pauses = pauses.filter(pause_in_status(filters["status"]))
        rows, total = window_page(pauses.order_by("-created_at", "-pk"), offset, limit)
        return Page(rows, total)
