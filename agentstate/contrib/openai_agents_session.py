"""The OpenAI Agents SDK's ``Session`` (conversation memory) on an agentstate context list.

``AgentStateSession(session_id)`` keeps a session's items in one list
variable, named by the session id, of the scope ``SESSION_SCOPE``
(``"agentstate.sessions"``) of ``owner`` (a user, a username, or ``None``:
the site's namespace); each item is one element of the list. So that every
process sharing the database shares the history:

- ``add_items`` appends all the items in one atomic step (``context.extend``):
  concurrent writers never interleave inside one call, and one writer's items
  keep their order;
- ``get_items(limit)`` reads the last ``limit`` items (``context.get_list``),
  at a cost that grows with ``limit``, not with the history;
- ``pop_item`` is an atomic LIFO ``context.pop``: of two processes popping at
  once, each gets its own item; ``None`` when the session is empty;
- ``clear_session`` deletes the variable.

The methods are async and never block the event loop: each runs its service
call in Django's thread for the database (``sync_to_async``, as the services'
``a``-named forms do). The SDK's ``Session`` is a protocol, so this module never imports
the SDK: a process that only keeps sessions does not pay for its import.
Re-exported by ``agentstate.contrib.openai_agents``; see docs/openai-agents.md,
"Sessions".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from agentstate.exceptions import ScopeNotFound, VariableNotFound
from agentstate.services import context
from agentstate.validation import check_key

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

SESSION_SCOPE = "agentstate.sessions"
"""The scope holding each session's items, one list variable per session id."""


class AgentStateSession:
    """An Agents SDK session stored in agentstate: pass it as ``Runner.run(..., session=)``.

    ``session_id`` names the list variable (1 to 255 characters); ``owner``
    the scope's owner; ``scope`` another scope than ``SESSION_SCOPE``;
    ``session_settings`` the SDK's settings (``limit``: how many of the last
    items ``get_items()`` reads when given no limit); ``actor``: recorded as
    the variable's ``updated_by``.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        *,
        owner: context.Owner = None,
        scope: str = SESSION_SCOPE,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        actor: str = "",
    ) -> None:
        self.session_id = check_key(session_id, "session_id")
        self.scope = check_key(scope, "scope")
        self.owner = owner
        self.actor = actor
        if isinstance(session_settings, dict):  # as the SDK's own sessions take one
            from agents.memory.session_settings import coerce_session_settings

            session_settings = coerce_session_settings(session_settings)
        self.session_settings = session_settings

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items in order; with ``limit`` (else the settings' limit) only
        the last ``limit`` of them: none for 0, and all of them for a negative limit,
        as the SDK's ``SQLiteSession`` answers."""
        last = limit if limit is not None else getattr(self.session_settings, "limit", None)
        if last == 0:
            return []
        if last is not None and last < 0:
            last = None
        items: list[TResponseInputItem] = await sync_to_async(self._get_items)(last)
        return items

    def _get_items(self, last: int | None) -> list[Any]:
        try:
            return context.get_list(self.scope, self.session_id, last=last, owner=self.owner).values
        except (ScopeNotFound, VariableNotFound):
            return []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` in order, all of them or (refused) none."""
        if not items:
            return
        await context.aextend(
            self.scope, self.session_id, list(items), owner=self.owner, by=self.actor
        )

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the most recent item; ``None`` when there is none."""
        item: TResponseInputItem | None = await sync_to_async(self._pop_item)()
        return item

    def _pop_item(self) -> Any:
        try:
            return context.pop(self.scope, self.session_id, "LIFO", owner=self.owner, by=self.actor)
        except (ScopeNotFound, VariableNotFound):
            return None

    async def clear_session(self) -> None:
        """Remove every item of the session."""
        await sync_to_async(self._clear)()

    def _clear(self) -> None:
        try:
            context.delete(self.scope, self.session_id, owner=self.owner)
        except (ScopeNotFound, VariableNotFound):
            pass
