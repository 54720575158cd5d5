"""Integrations with agent runtimes; each module imports its runtime only when used.

``register(name, bridge)`` names a bridge (``openai_agents.ApprovalBridge``,
``langgraph.GraphBridge``, ``pydantic_ai.DeferredBridge``) in this process, e.g.
in an ``AppConfig.ready``. A run that waits on a registered bridge resumes by
itself: deciding its last pending approval request enqueues the Celery task
``agentstate.tasks.resume_run``, which resumes it on any worker, exactly once.
Register the same bridges under the same names in the processes that decide
(the web server) and in the Celery workers. This module imports no model, so an
``AppConfig`` module may import it. See docs/bridges.md.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentstate.contrib.core import Bridge

__all__ = ["register", "registered", "unregister"]

logger = logging.getLogger(__name__)

_bridges: dict[str, Bridge] = {}


def register(name: str, bridge: Bridge) -> Bridge:
    """Name ``bridge`` so that its waiting runs resume by themselves once decided;
    returns it. A name taken by another bridge is replaced."""
    from agentstate import signals
    from agentstate.validation import check_key

    check_key(name, "name")
    bridge.name = name
    _bridges[name] = bridge
    signals.approval_decided.connect(_resume_when_decided, dispatch_uid="agentstate.contrib")
    return bridge


def unregister(name: str) -> None:
    """Forget the bridge registered as ``name`` (its runs wait for a ``resume`` call)."""
    bridge = _bridges.pop(name, None)
    if bridge is not None:
        bridge.name = None


def registered(name: str) -> Bridge:
    """The bridge registered as ``name``; ``LookupError`` naming the known ones."""
    try:
        return _bridges[name]
    except KeyError:
        known = ", ".join(sorted(_bridges)) or "none"
        raise LookupError(f"No bridge is registered as {name!r} (registered: {known}).") from None


def _resume_when_decided(sender: Any, event: Any, instance: Any, **kwargs: Any) -> None:
    """After a decision commits: if it was the last pending request of a run waiting on
    a registered bridge, queue ``resume_run`` (which takes the run exactly once)."""
    from agentstate.contrib.core import ServiceStore, waiting_on
    from agentstate.models import ApprovalRequest
    from agentstate.services.approvals import in_status

    if instance is None or not _bridges:
        return
    pending = ApprovalRequest.objects.filter(run_id=instance.run_id).filter(
        in_status(ApprovalRequest.Status.PENDING)
    )
    if pending.exists():
        return
    run_id = instance.run.run_id
    name = waiting_on(ServiceStore().peek_state(run_id))
    if name not in _bridges:
        return
    try:
        from agentstate.tasks import resume_run

        resume_run.delay(name, run_id)
    except Exception:  # noqa: BLE001 - the decision stands; a resume call still resumes it
        logger.warning("could not queue the resumption of run %s", run_id, exc_info=True)
