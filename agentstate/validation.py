"""Rules for what a key, a name, a run id and a JSON value may be.

Shared by the services (trusted Python callers get the same refusals) and the
REST serializers, so each rule lives here once.
"""

import math
import re
from typing import Any

from agentstate.exceptions import BadInput
from agentstate.models import KEY_LENGTH, RUN_ID_LENGTH

RUN_ID_RE = re.compile(rf"[A-Za-z0-9._:-]{{1,{RUN_ID_LENGTH}}}")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """Why a string cannot be stored (U+0000, an unpaired surrogate), or None."""
    if "\x00" in value:
        return "must not contain U+0000"
    if _SURROGATE_RE.search(value):
        return "must not contain an unpaired surrogate"
    return None


def check_key(value: Any, field: str, max_length: int = KEY_LENGTH) -> str:
    """A scope key, variable name, chat id, call id or tool name."""
    if not isinstance(value, str):
        raise BadInput(f"{field} must be a string.", field=field)
    if not 1 <= len(value) <= max_length:
        raise BadInput(f"{field} must be 1 to {max_length} characters.", field=field)
    problem = text_problem(value)
    if problem:
        raise BadInput(f"{field} {problem}.", field=field)
    return value


def check_run_id(value: Any, field: str = "run_id") -> str:
    if not isinstance(value, str) or not RUN_ID_RE.fullmatch(value) or value in {".", ".."}:
        raise BadInput(
            f"{field} must be 1 to {RUN_ID_LENGTH} characters of A-Z a-z 0-9 . _ : - "
            "(and not '.' or '..').",
            field=field,
        )
    return value


def json_problem_at(value: Any, max_depth: int | None = None) -> tuple[str, str] | None:
    """Where and why a decoded JSON value cannot be stored, or None.

    The place is a dotted path from the outer value (``""`` for the value
    itself, ``"value.2.key"`` inside it), so a client is told which field is
    bad. Depth counts the outer value as 1. Iterative, so a hostile nesting
    cannot exhaust the stack.
    """
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        item, depth, path = stack.pop()
        if max_depth is not None and depth > max_depth:
            return "", f"is nested deeper than {max_depth} levels"
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return path, problem
        elif isinstance(item, bool) or item is None or isinstance(item, int):
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                return path, "must not contain NaN or Infinity"
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                if not isinstance(key, str):
                    return path, "has an object key that is not a string"
                problem = text_problem(key)
                if problem:
                    return path, f"has an object key that {problem}"
                stack.append((child, depth + 1, f"{path}.{key}" if path else key))
        elif isinstance(item, list | tuple):
            stack.extend(
                (child, depth + 1, f"{path}.{index}" if path else str(index))
                for index, child in reversed(list(enumerate(item)))
            )
        else:
            kind = type(item).__name__
            article = "an" if kind[:1].lower() in "aeiou" else "a"
            return path, f"holds {article} {kind}, which is not JSON"
    return None


def check_json(value: Any, field: str, max_depth: int | None = None) -> Any:
    """``value`` if it can be stored as JSON, else ``BadInput`` naming the place
    (``value.plan.0 holds a set, which is not JSON.``)."""
    found = json_problem_at(value, max_depth)
    if found:
        path, problem = found
        raise BadInput(f"{field}{'.' + path if path else ''} {problem}.", field=field)
    return value
