"""What a bridge keeps and files, shared by the bridge's lifecycle (``core``) and its
stores (``service_store``, ``resumes``): the scope of the kept state, the calls and
reviews, the questions, a step's usage, and the words the model is told.

It imports no model and no framework, so that every module of ``agentstate.contrib``
can use it; ``agentstate.contrib.core`` names each of these too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple, TypedDict, cast

from agentstate.exceptions import BadInput
from agentstate.types import USAGE_FIELDS

STATE_SCOPE = "agentstate.bridges"
"""The scope holding each waiting run's framework state, one variable per run id."""

REJECTED = "A reviewer rejected this call."
"""What the model is told of a call rejected without a reason."""

EXPIRED = "The approval request expired before anybody decided it."
"""What the model is told of a call whose approval request expired."""

USED = "This call's approval was used already: it did not run again."
"""What the model is told of an approved call replayed after its approval was used."""


class UsageDelta(TypedDict):
    """Usage to add to a run, in agentstate's flat form: ``USAGE_FIELDS``, the counters
    of ``runs.add_usage`` (a TypedDict's keys are spelled out for the type checker)."""

    requests: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int


def usage(**counters: int) -> UsageDelta:
    """A ``UsageDelta`` with the counters given and every other one 0."""
    return cast(UsageDelta, dict.fromkeys(USAGE_FIELDS, 0) | counters)


class Call(NamedTuple):
    """A gated tool call a stopped run waits on, as filed for review."""

    tool_name: str
    call_id: str
    arguments: Any = None


@dataclass(frozen=True)
class Review:
    """An approval request as a bridge needs it, from either store.

    ``approved_arguments``: what the reviewer approved instead of ``arguments`` (the
    model's), or ``None``; ``arguments_to_run`` is the call a caller should run."""

    id: int
    tool_name: str
    call_id: str
    arguments: Any
    status: str
    always: bool = False
    reason: str = ""
    approved_arguments: Any = None

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    @property
    def approved(self) -> bool:
        return self.status == "approved"

    @property
    def edited(self) -> bool:
        """Approved with other arguments than the model's."""
        return self.approved and self.approved_arguments is not None

    @property
    def arguments_to_run(self) -> Any:
        """The arguments the call may run with: the approved ones if edited, else as filed."""
        return self.approved_arguments if self.edited else self.arguments

    # What the model is told of a decided call, in the same words by every adapter.

    @property
    def refusal(self) -> str:
        """What to tell the model of a call that may not run: the reviewer's reason, or
        why there is none (``EXPIRED``, ``REJECTED``)."""
        if self.reason:
            return self.reason
        if self.status == "expired":
            return EXPIRED
        return REJECTED

    def not_run(self, why: str) -> str:
        """What to tell the model of a call approved only with other arguments that
        cannot run as an edit: ``why`` ("which ...") says what stands in the way."""
        edited = json.dumps(self.approved_arguments, ensure_ascii=False)
        return (
            f"A reviewer approved this call only with other arguments, {edited}, {why}:"
            " it did not run."
        )

    @property
    def unrunnable_edit(self) -> str | None:
        """What to tell the model of an edited call whose arguments cannot be a tool's
        (not a JSON object): it does not run. ``None`` when they can."""
        if isinstance(self.approved_arguments, dict):
            return None
        return self.not_run("which are not a JSON object, as a tool's arguments must be")

    def ran(self, output: Any) -> str:
        """What to tell the model of a call the bridge ran itself with the reviewer's
        edited arguments, in place of the model's call: what it returned."""
        edited = json.dumps(self.approved_arguments, ensure_ascii=False)
        return (
            f"A reviewer approved this call with edited arguments, {edited}; it ran with them"
            f" and returned: {output}"
        )


@dataclass(frozen=True)
class Question:
    """A waiting pause of a run: answer it with ``question_id``."""

    interrupt_id: str
    question_id: str
    value: Any


def unpacked(run_id: str, kept: Any) -> dict[str, Any]:
    """What ``wait`` kept: ``{"bridge": name, "state": state}`` (``BadInput`` for
    anything else in the run's variable)."""
    try:
        unpacked = json.loads(kept)
    except (TypeError, ValueError):
        unpacked = None
    if not isinstance(unpacked, dict) or "state" not in unpacked:
        raise BadInput(
            f"The variable {run_id!r} of the scope {STATE_SCOPE!r} holds no bridge's state."
        )
    return unpacked


def waiting_on(kept: str | None) -> str | None:
    """The name of the bridge a run's kept state waits on (``None``: unnamed, none kept,
    or not a bridge's)."""
    try:
        name = None if kept is None else unpacked("", kept).get("bridge")
    except BadInput:
        return None
    return name if isinstance(name, str) else None
