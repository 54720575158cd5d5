"""Waiting for a change without polling: the rules every waiter shares.

``until`` is the one waiting loop: it registers a waiter with the process's
hub (``services.wakeups``) first, then reads (``check``, on the waiters'
thread), and sleeps until a notice the waiter wants arrives, a deadline the
check names passes (a pending request's expiry, reached by the clock, sweep
or not), or the time is up; then it reads again. Nothing is held while it
sleeps: no thread, no database connection.

What is waited for:

- an approval request: until it is no longer pending (decided, or expired at
  ``created_at + APPROVAL_TTL``);
- a run: until its approval records or its requests differ from what they
  were when the wait began;
- events: ``api.events`` reads the feed (``backends.feed``) with ``until``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import QuerySet
from django.utils import timezone

from agentstate.conf import agentstate_settings
from agentstate.exceptions import BadInput
from agentstate.models import ApprovalRequest

from .wakeups import Notice, Wants, hub, run

T = TypeVar("T")
# A check's answer: (what it read, whether the wait is over, seconds until it
# must read again whatever wakes it, or None).
Check = Callable[[], tuple[T, bool, float | None]]


def check_wait(value: Any, field: str = "wait") -> float:
    """``wait`` as a REST query gives it: a number of seconds above 0 and at most
    ``AGENTSTATE["MAX_WAIT"]`` (fractions allowed)."""
    limit = agentstate_settings.MAX_WAIT
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not (0 < seconds <= limit):
        raise BadInput(
            f"{field} must be a number of seconds above 0 and at most {limit}.", field=field
        )
    return seconds


async def until(
    check: Check[T],
    wants: Callable[[Notice], bool],
    timeout: float,
    key: Any = None,
) -> T:
    """What ``check`` read when it said the wait is over, or when ``timeout`` passed.
    Waiters whose checks read the same (the same ``key``) share a read."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout, 0)
    with hub().waiter(wants) as waiter:
        while True:
            value, done, again = await run(check, key=key)
            left = deadline - loop.time()
            if done or left <= 0:
                return value
            await waiter.sleep(left if again is None else min(left, max(again, 0.02)))


def seconds_until(moment: datetime | None) -> float | None:
    if moment is None:
        return None
    return (moment - timezone.now()).total_seconds()


# An approval request.


def current(request: ApprovalRequest) -> str:
    """A request's ``current_status`` (annotated by ``approvals.with_current_status``)."""
    status: str = request.current_status  # type: ignore[attr-defined]
    return status


def deadline_of(request: ApprovalRequest) -> datetime:
    """When the request stops being pending: its rule's deadline, fixed at filing, or
    (filed under no rule) its creation plus ``APPROVAL_TTL`` as it is now."""
    if request.deadline is not None:
        return request.deadline
    return request.created_at + agentstate_settings.APPROVAL_TTL


def request_notice(pk: int) -> Wants:
    return Wants((("object_type", "approvalrequest"), ("object_id", str(pk))))


def request_check(requests: QuerySet[ApprovalRequest], pk: int) -> Callable[[], Any]:
    """A ``Check`` of the request ``pk`` among ``requests`` (annotated with
    ``current_status``): over once it is not pending; ``None`` when missing."""

    def check() -> tuple[ApprovalRequest | None, bool, float | None]:
        found = requests.filter(pk=pk).first()
        if found is None:
            return None, True, None
        pending = current(found) == ApprovalRequest.Status.PENDING
        return found, not pending, seconds_until(deadline_of(found) if pending else None)

    return check


# A run: its records and its requests.


def run_notice(run_id: str) -> Wants:
    return Wants((("run_id", run_id),))


def run_state(requests: QuerySet[ApprovalRequest], run_id: str) -> tuple[Any, float | None]:
    """What a run's waiter compares: its requests' ids and current statuses, and the
    seconds until the next pending one expires."""
    rows = list(requests.filter(run__run_id=run_id).order_by("pk"))
    deadlines = [deadline_of(r) for r in rows if current(r) == ApprovalRequest.Status.PENDING]
    return [(r.pk, current(r)) for r in rows], seconds_until(min(deadlines, default=None))


def run_check(read: Callable[[], tuple[Any, Any]], before: Any) -> Callable[[], Any]:
    """A ``Check`` of a run: ``read`` answers (what the caller gets, what is compared,
    seconds until the next expiry); over once what is compared differs from ``before``."""

    def check() -> tuple[Any, bool, float | None]:
        answer, (compared, again) = read()
        return answer, compared != before, again

    return check


# Events.


def events_notice(filters: dict[str, Any], run_id: str | None) -> Wants:
    """The notices of events a follower's filters (``kind``, ``object_type``,
    ``object_id``, ``run_id``) may match; what it may see is read again."""
    return Wants((*filters.items(), *((("run_id", run_id),) if run_id is not None else ())))


def requests_check(requests: QuerySet[ApprovalRequest], run_id: str) -> Callable[[], Any]:
    """A ``Check`` of a run's requests among ``requests`` (annotated with
    ``current_status``): over once none is pending."""

    def check() -> tuple[list[ApprovalRequest], bool, float | None]:
        rows = list(requests.filter(run__run_id=run_id).order_by("pk"))
        pending = [r.created_at for r in rows if current(r) == ApprovalRequest.Status.PENDING]
        expiry = min(pending) + agentstate_settings.APPROVAL_TTL if pending else None
        return rows, not pending, seconds_until(expiry)

    return check


def check_timeout(timeout: Any) -> float:
    """A Python caller's ``timeout``: a number of seconds, 0 or more."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
        raise BadInput("timeout must be a number of seconds, 0 or more.", field="timeout")
    return float(timeout)
