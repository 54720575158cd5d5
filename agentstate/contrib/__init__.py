"""Integrations with agent runtimes; each module imports its runtime only when used.

``register(name, bridge)`` names a bridge (``openai_agents.ApprovalBridge``,
``langgraph.GraphBridge``, ``pydantic_ai.DeferredBridge``) in this process, e.g.
in an ``AppConfig.ready``. A run that waits on a registered bridge resumes by
itself: deciding its last pending approval request enqueues the Celery task
``agentstate.tasks.resume_run``, which resumes it on any worker, exactly once
(``agentstate.tasks`` receives the decision; without Celery a run waits for a
``resume`` call). Register the same bridges under the same names in the
processes that decide (the web server) and in the Celery workers. This module
imports no model, so an ``AppConfig`` module may import it. See docs/bridges.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentstate.contrib.core import Bridge

__all__ = ["register", "registered", "registered_names", "unregister"]

_bridges: dict[str, Bridge] = {}


def register(name: str, bridge: Bridge) -> Bridge:
    """Name ``bridge`` so that its waiting runs resume by themselves once decided;
    returns it. A name taken by another bridge is replaced."""
    # in the function: agentstate.validation imports the models, which an AppConfig
    # module that registers a bridge cannot import yet
    from agentstate.validation import check_key

    check_key(name, "name")
    bridge.name = name
    _bridges[name] = bridge
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


def registered_names() -> frozenset[str]:
    """The names bridges are registered under in this process."""
    return frozenset(_bridges)
