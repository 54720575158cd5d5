"""The plain data types that travel between the layers: who acts, whose objects an
operation may touch, approval records, LangGraph's checkpoint parts.

This module imports nothing of agentstate, so every module (the models included)
may import it. The types that hold model instances (``Changed``, ``BudgetState``)
are the backend interface's, in ``agentstate.backends.base``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

# A run's approval records in the OpenAI Agents SDK's form: per tool name,
# ``{"approved": true | false | [call ids], "rejected": ...}`` (``agentstate.records``).
Records = dict[str, dict[str, bool | list[str]]]
# The scopes of LangGraph's store (``agentstate.contrib.langgraph.AgentStateStore``): the
# site's own (no owner) whose key starts with this.
STORE_PREFIX = "langgraph:"
# A scope's owner: a user's id or username; ``None``: the site's namespace.
Owner = int | str | None
# The usage counters of a run, in the order every usage map and the API list them
# (``Run``'s columns, ``runs.add_usage``'s arguments, a bridge's ``UsageDelta``).
USAGE_FIELDS = (
    "requests",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cached_tokens",
    "reasoning_tokens",
)


@dataclass(frozen=True)
class Reach:
    """The objects of one caller: those it created (``user_id``) and, for pauses and
    events, those it owns (``username``); for events, also every event about an
    object of a model named in ``object_types``. ``None`` as a reach: every object."""

    user_id: int | None
    username: str = ""
    object_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class Actor:
    """Who makes a change, as its events record it: the user (``None``: no
    user, like the sweeper) and the principal's name (``actor``)."""

    user_id: int | None = None
    name: str = ""

    @classmethod
    def of(cls, user: Any = None, name: str | None = None) -> Actor:
        """``user`` (anonymous or none: no user) named ``name``, else by its username."""
        signed_in = getattr(user, "is_authenticated", False)
        return cls(
            user.pk if signed_in else None, name or (user.get_username() if signed_in else "")
        )


# Who the sweep's changes are recorded as: no user.
SWEEPER = Actor(name="sweeper")


# How old a LangGraph thread's ``updated_at`` may be before a put sets it again (an
# index entry each time); the sweep of ``THREAD_TTL`` waits this much longer.
THREAD_TOUCH = timedelta(minutes=1)

# A channel's value put with a checkpoint: (channel, version, serde type, bytes);
# type "empty" with no bytes: the channel was emptied (rows of earlier releases:
# an emptied channel now has no row).
Blob = tuple[str, str, str, bytes | None]
# A pending write: (idx, channel, serde type, bytes).
Write = tuple[int, str, str, bytes]
# One call's pending writes, a task's: (task_id, task_path, writes).
WriteCall = tuple[str, str, list[Write]]


@dataclass(frozen=True)
class Put:
    """A checkpoint's put: whether it forked the thread's history, and whether it
    was refused (nothing written) because its base is no longer stored."""

    forked: bool
    rebase: bool = False


@dataclass(frozen=True)
class StoredCheckpoint:
    """A LangGraph checkpoint as a backend reads it back: the checkpoint (JSON,
    without channel values), its metadata, the values of its channel versions
    (``(channel, type, bytes)``, empty ones left out) and its pending writes
    (``(task_id, channel, type, bytes, task_path, idx)``)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    blobs: list[tuple[str, str, bytes]]
    writes: list[tuple[str, str, str, bytes, str, int]]


def arguments_digest(arguments: Any) -> str:
    """The SHA-256 (hex) of ``arguments`` as canonical JSON: keys sorted, no spaces,
    UTF-8 (non-ASCII characters as themselves). What binds an approval to a call."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# Who the records and events name as having decided a request at its rule's deadline,
# and the reason they give.
RULE_ACTOR = "rule:%s"
DEADLINE_REASON = "Decided at its deadline by its approval rule."

# What a check of one call answers: approved (``True``, ``False``, ``None``:
# pending) and why not, when the reason is worth saying (``"arguments_changed"``).
Verdict = tuple[bool | None, str | None]

# Why a call approved for other arguments answers not approved.
ARGUMENTS_CHANGED = "arguments_changed"
