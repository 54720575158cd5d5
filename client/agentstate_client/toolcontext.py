"""``ToolContext`` over REST: the Python API's context object, its state kept by a server."""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

from .client import AgentStateClient

T = TypeVar("T")


class RemoteSharedState:
    """A handle on one scope of one server: what contexts pass to share state."""

    def __init__(self, client: AgentStateClient, scope: str, owner: str | None = None) -> None:
        self.client = client
        self.scope = scope
        self.owner = owner

    def __repr__(self) -> str:
        return f"RemoteSharedState(scope={self.scope!r}, owner={self.owner!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemoteSharedState) and (
            other.client,
            other.scope,
            other.owner,
        ) == (self.client, self.scope, self.owner)

    def __hash__(self) -> int:
        return hash((id(self.client), self.scope, self.owner))


class RemoteToolContext:
    """``agentstate.toolcontext.ToolContext`` with its state kept over REST.

    A conversation id, a shared state handle (a scope on the server) and
    typed extensions (in-process objects keyed by type, never sent). Over
    REST the actor recorded for a change is the authenticated user.
    """

    def __init__(
        self,
        client: AgentStateClient,
        *,
        conversation_id: str | None = None,
        shared_state: RemoteSharedState | None = None,
        _extensions: dict[type, Any] | None = None,
    ) -> None:
        self.client = client
        self._conversation_id = conversation_id
        self._state = shared_state or RemoteSharedState(client, f"toolcontext-{uuid.uuid4()}")
        self._extensions = {} if _extensions is None else _extensions

    def _derive(
        self,
        *,
        conversation_id: str | None = None,
        shared_state: RemoteSharedState | None = None,
    ) -> RemoteToolContext:
        return RemoteToolContext(
            self.client,
            conversation_id=self._conversation_id if conversation_id is None else conversation_id,
            shared_state=self._state if shared_state is None else shared_state,
            _extensions=self._extensions,
        )

    @property
    def conversation_id(self) -> str | None:
        return self._conversation_id

    def with_conversation_id(self, conversation_id: str) -> RemoteToolContext:
        return self._derive(conversation_id=conversation_id)

    def with_caller(self, conversation_id: str) -> RemoteToolContext:
        """Another identity sharing this context's state and extensions."""
        return self._derive(conversation_id=conversation_id)

    def with_shared_state(self, handle: RemoteSharedState) -> RemoteToolContext:
        return self._derive(shared_state=handle)

    def shared_state(self) -> RemoteSharedState:
        return self._state

    def get_state(self, key: str, default: Any = None) -> Any:
        """Never fails: the value, or ``default`` (absent, unknown scope, unreachable)."""
        return self._state.client.get_state(
            self._state.scope, key, default, owner=self._state.owner
        )

    def set_state(self, key: str, value: Any) -> None:
        """Raises on any failure: a lost write is never silent."""
        self._state.client.set_state(self._state.scope, key, value, owner=self._state.owner)

    def set_ext(self, value: Any) -> None:
        self._extensions[type(value)] = value

    def get_ext(self, cls: type[T]) -> T | None:
        return self._extensions.get(cls)
