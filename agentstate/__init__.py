"""agentstate: durable, exactly-once state for AI-agent runs on Django.

``ToolContext`` is importable from the package top level; it is loaded lazily
so that importing ``agentstate`` never touches the app registry.
"""

from typing import Any

__version__ = "0.1.0"

__all__ = ["ToolContext", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "ToolContext":
        from agentstate.toolcontext import ToolContext

        return ToolContext
    raise AttributeError(f"module 'agentstate' has no attribute {name!r}")
