"""LangGraph on agentstate's tables: a checkpointer, a store and a bridge.

``AgentStateSaver`` is a ``BaseCheckpointSaver`` (sync and async) keeping
checkpoints, channel values per version and pending writes in agentstate's
own tables; ``AgentStateStore`` is a ``BaseStore`` on context variables (a
namespace is a scope, a key a variable). Both work on Django's default
database; ``using=`` names another. ``GraphBridge`` runs a graph so that its
interrupts wait for agentstate's pauses and approval requests. LangGraph is
imported here: where it is not installed, importing this module raises
``MissingExtra`` naming the extra (``pip install "django-agentstate[langgraph]"``).
See docs/langgraph.md.
"""

from agentstate.extras import missing

try:
    import langgraph.checkpoint.base  # noqa: F401
    import langgraph.store.base  # noqa: F401
except ImportError as error:
    raise missing("langgraph", "agentstate.contrib.langgraph", error) from error

from .bridge import GraphBridge
from .saver import AgentStateSaver
from .store import AgentStateStore

__all__ = ["AgentStateSaver", "AgentStateStore", "GraphBridge"]
