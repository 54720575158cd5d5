"""``ToolContext``: what a tool call carries, after ``llm_tool``'s ToolContext.

A conversation id (who is calling), a handle on shared state (a scope of
context variables, kept in the database so every process sees it) and typed
extensions (in-process objects keyed by their type, never stored).

Reads are best-effort and writes are not, as in the reference design: a
missing value and an unreachable store look alike to a tool, so
``get_state`` returns the default (and logs a warning), while ``set_state``
raises, because a write that silently vanishes causes subtle bugs.

Every change made through a context records its conversation id as the
actor (``Variable.updated_by``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, TypeVar

from agentstate import tools
from agentstate.services import context
from agentstate.services.context import Owner, PutResult
from agentstate.validation import check_key

T = TypeVar("T")

FRESH_SCOPE_PREFIX = "toolcontext-"


@dataclass(frozen=True)
class SharedState:
    """A handle on one scope: what contexts pass to each other to share state.

    ``owner`` is the user the scope belongs to, or ``None`` for the site's
    own namespace.
    """

    scope: str
    owner: Owner = None

    def __post_init__(self) -> None:
        check_key(self.scope, "scope")


class ToolContext:
    """A conversation id, a shared state handle and typed extensions.

    ``ToolContext()`` gets a fresh scope of its own (a new unique key, in the
    site's namespace unless ``owner`` is given); nothing is stored until the
    first ``set_state``. Contexts derived with ``with_*`` share this one's
    extensions; ``with_caller`` is how one session serves many callers.
    """

    def __init__(
        self,
        conversation_id: str | None = None,
        shared_state: SharedState | None = None,
        *,
        owner: Owner = None,
    ) -> None:
        if conversation_id is not None:
            check_key(conversation_id, "conversation_id")
        self._conversation_id = conversation_id
        self._state = shared_state or SharedState(f"{FRESH_SCOPE_PREFIX}{uuid.uuid4()}", owner)
        self._extensions: dict[type, Any] = {}

    def __repr__(self) -> str:
        return (
            f"ToolContext(conversation_id={self._conversation_id!r}, shared_state={self._state!r})"
        )

    def _derive(self, conversation_id: str | None, state: SharedState) -> ToolContext:
        derived = ToolContext(conversation_id, state)
        derived._extensions = self._extensions
        return derived

    # Identity and state handle

    @property
    def conversation_id(self) -> str | None:
        return self._conversation_id

    def with_conversation_id(self, conversation_id: str) -> ToolContext:
        """This context under ``conversation_id`` (same state, same extensions)."""
        return self._derive(conversation_id, self._state)

    def with_caller(self, conversation_id: str) -> ToolContext:
        """A new identity reading and writing the same state and extensions."""
        return self._derive(conversation_id, self._state)

    def with_shared_state(self, handle: SharedState) -> ToolContext:
        """This context on another context's state (from its ``shared_state()``)."""
        if not isinstance(handle, SharedState):
            raise TypeError("with_shared_state() takes a SharedState handle (from shared_state()).")
        return self._derive(self._conversation_id, handle)

    def shared_state(self) -> SharedState:
        return self._state

    @property
    def actor(self) -> str:
        """What changes made through this context record as their author."""
        return self._conversation_id or ""

    # State (in the database)

    def get_state(self, key: str, default: Any = None) -> Any:
        """Never fails: the value, or ``default`` (absent, unknown scope, store unreachable)."""
        return context.get_state(self._state.scope, key, default, owner=self._state.owner)

    def set_state(self, key: str, value: Any) -> PutResult:
        """Store ``value`` under ``key``; raises on any failure (a lost write is never silent)."""
        return context.set_state(
            self._state.scope, key, value, owner=self._state.owner, by=self.actor
        )

    def call_tool(self, name: str, arguments: dict[str, Any] | str | None) -> str:
        """Run one of ``agentstate.tools``' function tools on this context's scope."""
        return tools.dispatch(
            name, arguments, scope=self._state.scope, owner=self._state.owner, actor=self.actor
        )

    # Typed extensions (in process, never stored)

    def set_ext(self, value: Any) -> None:
        """Keep ``value`` under its type, replacing any earlier value of that type."""
        self._extensions[type(value)] = value

    def get_ext(self, cls: type[T]) -> T | None:
        """The value of exactly type ``cls`` given to ``set_ext``, or ``None``."""
        return self._extensions.get(cls)
