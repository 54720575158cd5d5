"""The sweep on the ORM: each batch one transaction over the rows it locked.

A batch selects at most ``size`` due rows ``FOR UPDATE SKIP LOCKED`` (two
sweeps take disjoint batches and never wait for a claim in progress; SQLite
serializes them instead), changes them with one bulk statement and appends
one event per row. Only the batch's keys are ever in memory.
"""

from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.db.models.functions import Now

from agentstate.backends import events
from agentstate.backends.base import Changed
from agentstate.db import database_epoch
from agentstate.models import (
    ApprovalRequest,
    Delivery,
    DeliveryAttempt,
    Element,
    Event,
    PausedRun,
    Scope,
    Variable,
)
from agentstate.types import STORE_PREFIX, SWEEPER

from .operations import Operations


class SweepOperations(Operations):
    def expire_pauses(self, size: int, after: Any = None, answer: bool = True) -> Changed[int]:
        return self.atomic(self._expire_pauses, size, after)

    def _expire_pauses(self, size: int, after: Any) -> Changed[int]:
        rows = self.rows(PausedRun).pending().past_expiry()
        if after is not None:
            expires_at, pk = after
            rows = rows.filter(Q(expires_at__gt=expires_at) | Q(expires_at=expires_at, pk__gt=pk))
        due = list(
            rows.select_for_update(skip_locked=True)
            .order_by("expires_at", "pk")
            .values_list(
                "pk",
                "chat_id",
                "tool_call_id",
                "owner",
                "created_by_id",
                "question_id",
                "expires_at",
            )[:size]
        )
        if not due:
            return Changed(0, [], after)
        # Locked, and pending past expiry when locked: one UPDATE for all.
        self.rows(PausedRun).filter(pk__in=[row[0] for row in due]).update(
            status=PausedRun.Status.EXPIRED
        )
        expired = events.save(
            self.alias,
            (
                events.new(
                    "pause.expired",
                    PausedRun,
                    PausedRun.object_id(chat_id, tool_call_id),
                    SWEEPER,
                    created_by_id=created_by_id,
                    owner=owner,
                    details={"question_id": str(question_id)},
                )
                for _pk, chat_id, tool_call_id, owner, created_by_id, question_id, _at in due
            ),
        )
        return Changed(len(due), expired, (due[-1][6], due[-1][0]))

    def expire_approval_requests(self, size: int, approval_ttl: timedelta) -> Changed[int]:
        return self.atomic(self._expire_approval_requests, size, approval_ttl)

    def _expire_approval_requests(self, size: int, approval_ttl: timedelta) -> Changed[int]:
        due = list(
            self.lock_own(
                self.rows(ApprovalRequest)
                .pending()
                .filter(deadline__isnull=True)
                .older_than(approval_ttl),
                skip_locked=True,
            )
            .order_by("created_at")
            .values_list("pk", "created_by_id", "run__run_id", "tool_name", "call_id")[:size]
        )
        if not due:
            return Changed(0, [])
        self.rows(ApprovalRequest).filter(pk__in=[row[0] for row in due]).update(
            status=ApprovalRequest.Status.EXPIRED
        )
        expired = events.save(
            self.alias,
            (
                events.new(
                    "approval.expired",
                    ApprovalRequest,
                    str(pk),
                    SWEEPER,
                    created_by_id=created_by_id,
                    details={"run_id": run_id, "tool_name": tool_name, "call_id": call_id},
                )
                for pk, created_by_id, run_id, tool_name, call_id in due
            ),
        )
        return Changed(len(due), expired)

    def purge_pauses(self, size: int, retention: timedelta) -> int:
        return self.atomic(self._purge_pauses, size, retention)

    def _purge_pauses(self, size: int, retention: timedelta) -> int:
        # The resolved, then the expired, each read in the order of its own index: as
        # one OR, a batch could read every entry of both before its first row.
        finished: list[int] = []
        for status, changed in (
            (PausedRun.Status.RESOLVED, "resolved_at"),
            (PausedRun.Status.EXPIRED, "expires_at"),
        ):
            if len(finished) < size:
                finished += (
                    self.rows(PausedRun)
                    .filter(status=status, **{f"{changed}__lt": Now() - retention})
                    .select_for_update(skip_locked=True)
                    .order_by(changed)
                    .values_list("pk", flat=True)[: size - len(finished)]
                )
        if finished:
            self.rows(PausedRun).filter(pk__in=finished).delete()
        return len(finished)

    def purge_events(self, size: int, retention: timedelta) -> int:
        return self.atomic(self._purge_events, size, retention)

    def _purge_events(self, size: int, retention: timedelta) -> int:
        old = list(
            self.rows(Event)
            .filter(created_at__lt=Now() - retention)
            .select_for_update(skip_locked=True)
            .order_by("created_at")
            .values_list("pk", flat=True)[:size]
        )
        if old:
            self.rows(DeliveryAttempt).filter(delivery__event_id__in=old).delete()
            self.rows(Delivery).filter(event_id__in=old).delete()
            self.rows(Event).filter(pk__in=old).delete()
        return len(old)

    def purge_store_items(self, size: int, after: Any = None) -> Changed[int]:
        return self.atomic(self._purge_store_items, size, after)

    def _purge_store_items(self, size: int, after: Any) -> Changed[int]:
        now = database_epoch(self.alias)
        after_scope, after_name = after or (0, "")  # names are never ""
        scopes = (
            self.rows(Scope)
            .filter(owner__isnull=True, key__startswith=STORE_PREFIX, pk__gte=after_scope)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        expired: list[int] = []
        resume = None
        for scope_id in scopes.iterator(chunk_size=100):
            found = list(
                self.lock_own(self.rows(Variable), skip_locked=True)
                .filter(
                    scope_id=scope_id,
                    name__gt=after_name if scope_id == after_scope else "",
                    value__expires_at__lte=now,
                )
                .order_by("name")
                .values_list("pk", "name")[: size - len(expired)]
            )
            expired += [pk for pk, _name in found]
            if len(expired) >= size:
                resume = (scope_id, found[-1][1])
                break
        if expired:
            self.rows(Element).filter(variable_id__in=expired).delete()
            self.rows(Variable).filter(pk__in=expired).delete()
        return Changed(len(expired), [], resume)
