"""Taking a waiting run's bridge state under a lease, and finding runs left unresumed.

A bridge keeps a stopped run's framework state in the context variable named
after the run in the scope ``agentstate.bridges`` (``agentstate.contrib.core``).
Resuming takes it exactly once: ``take`` pops it and, in the same transaction,
writes a *lease* (the state as it was, and when it was taken) in the scope
``agentstate.resuming``; the resume ``release``-s the lease when it is over,
whatever its outcome. A process killed in between (a Celery worker's OOM kill,
a deploy) leaves the lease behind: once it is older than
``AGENTSTATE["RESUME_LEASE"]``, ``ready`` puts the state back and names the run,
and the beat task ``agentstate.tasks.resume_ready`` queues its resume again.

``ready`` also names the runs whose state waits on a registered bridge although
every approval request was decided after the state was kept: their
``resume_run`` message was lost (a broker restarted empty, a worker killed
before it acknowledged it). Queuing one twice is harmless: the second finds
nothing to take and is told ``busy``.
"""

from __future__ import annotations

import json
from datetime import datetime

from django.db import transaction
from django.db.models import Exists, Max, OuterRef

from agentstate.conf import agentstate_settings
from agentstate.contrib.kept import STATE_SCOPE, waiting_on
from agentstate.db import database_now
from agentstate.exceptions import ScopeNotFound, VariableNotFound, VersionMismatch
from agentstate.models import ApprovalRequest, Run, Variable
from agentstate.services import context

LEASE_SCOPE = "agentstate.resuming"
"""The scope of the leases: one variable per run being resumed."""

_ABSENT = (ScopeNotFound, VariableNotFound)


def take(run_id: str) -> str | None:
    """Pop the run's kept state and lease it, in one transaction (``None``: nothing kept)."""
    with transaction.atomic():
        try:
            kept: str = context.pop(STATE_SCOPE, run_id, by="bridge")
        except _ABSENT:
            return None
        # the database's clock, as the consumed_at it is compared with (``_restore``)
        lease = {"kept": kept, "taken_at": database_now().isoformat()}
        context.put(LEASE_SCOPE, run_id, json.dumps(lease), by="bridge")
    return kept


def release(run_id: str) -> None:
    """The resume of ``run_id`` is over (finished, waiting again, or its state put back)."""
    try:
        context.delete(LEASE_SCOPE, run_id)
    except _ABSENT:
        pass


def put_back(run_id: str) -> None:
    """A resume of ``run_id`` failed: its state back as it was taken, with the approvals
    it consumed (as a killed one's, ``ready``), and its lease released."""
    try:
        lease = json.loads(context.get_state(LEASE_SCOPE, run_id))
    except (*_ABSENT, TypeError, ValueError):
        return
    with transaction.atomic():
        _restore(run_id, lease)
        release(run_id)


def _restore(run_id: str, lease: dict[str, str]) -> bool:
    """The state ``lease`` took back in the run's variable (``False``: the run waits
    again with a newer one), and the approvals consumed since it was taken given back
    with it: the retry runs those calls again (a step of a resume that did not finish
    runs again)."""
    try:
        context.put(STATE_SCOPE, run_id, lease["kept"], if_version=0, by="bridge")
    except VersionMismatch:
        return False
    ApprovalRequest.objects.filter(
        run__run_id=run_id, consumed_at__gte=datetime.fromisoformat(lease["taken_at"])
    ).update(consumed_at=None)
    return True


def ready(now: datetime | None = None) -> list[tuple[str | None, str]]:
    """``(bridge name, run id)`` of every run that should be resumed and is not being:
    the leases older than ``RESUME_LEASE`` (their state is put back first), and the
    decided runs whose state still waits. ``now`` (default: the database's clock) is
    when the leases are judged."""
    now = now or database_now()
    found = _expired_leases(now)
    taken = {run_id for _name, run_id in found}
    waiting = [
        (run_id, kept, kept_at)
        for run_id, kept, kept_at in Variable.objects.filter(
            scope__key=STATE_SCOPE, scope__owner=None
        ).values_list("name", "value", "updated_at")
        if run_id not in taken
    ]
    decisions = _decisions([run_id for run_id, _kept, _at in waiting])
    for run_id, kept, kept_at in waiting:
        last, pending = decisions.get(run_id, (None, False))
        if last is None or last < kept_at:
            continue  # waiting on a question, or on requests filed after its last decision
        if pending:
            continue
        found.append((waiting_on(kept), run_id))
    return found


# Runs asked about in one query (well under SQLite's limit of parameters).
_RUNS_A_QUERY = 500


def _decisions(run_ids: list[str]) -> dict[str, tuple[datetime | None, bool]]:
    """Each run's last decision (``None``: none) and whether one of its requests is
    pending, ``_RUNS_A_QUERY`` runs a query (not two queries a run)."""
    from agentstate.services.approvals import in_status

    pending = ApprovalRequest.objects.filter(run=OuterRef("pk")).filter(
        in_status(ApprovalRequest.Status.PENDING)
    )
    answer: dict[str, tuple[datetime | None, bool]] = {}
    for start in range(0, len(run_ids), _RUNS_A_QUERY):
        rows = (
            Run.objects.filter(run_id__in=run_ids[start : start + _RUNS_A_QUERY])
            .annotate(last=Max("approval_requests__decided_at"), pending=Exists(pending))
            .values_list("run_id", "last", "pending")
        )
        answer.update((run_id, (last, waits)) for run_id, last, waits in rows)
    return answer


def _expired_leases(now: datetime) -> list[tuple[str | None, str]]:
    lease_seconds = agentstate_settings.RESUME_LEASE.total_seconds()
    leases = Variable.objects.filter(scope__key=LEASE_SCOPE, scope__owner=None).values_list(
        "name", "value", "version"
    )
    found: list[tuple[str | None, str]] = []
    for run_id, value, version in leases:
        if not isinstance(value, str):
            continue  # not a lease of ours
        try:
            lease = json.loads(value)
            taken_at = datetime.fromisoformat(lease["taken_at"])
        except (TypeError, ValueError, KeyError):
            continue  # not a lease of ours
        if (now - taken_at).total_seconds() < lease_seconds:
            continue
        with transaction.atomic():
            put_back = _restore(run_id, lease)
            try:  # the lease gone, unless it was taken again meanwhile
                context.put(LEASE_SCOPE, run_id, None, if_version=version, by="bridge")
                context.delete(LEASE_SCOPE, run_id)
            except VersionMismatch:
                transaction.set_rollback(True)
                continue
        if put_back:
            found.append((waiting_on(lease["kept"]), run_id))
    return found
