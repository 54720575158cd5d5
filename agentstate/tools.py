"""Context variables as LLM function tools, after machai's ProjectContextFunctionTools.

``SCHEMAS`` describes put, get, push and pop in the OpenAI function-tool
format; ``dispatch(name, arguments, scope=...)`` runs one call and answers
with a short message for the model ("variable x set", "no variable x in
scope y", the popped value). It never raises: bad arguments, an unknown tool,
a refused operation and an unreachable database all come back as a message
the model can read and act on.

A popped or read value comes back as JSON, except that a popped string is
returned as it is (the common case: a stack of notes or tasks).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError

from agentstate.conf import agentstate_settings
from agentstate.exceptions import AgentStateError, BadInput, ScopeNotFound, VariableNotFound
from agentstate.services import context
from agentstate.services.context import Owner
from agentstate.validation import check_json, check_key

logger = logging.getLogger(__name__)

PUT = "put_context_variable"
GET = "get_context_variables"
PUSH = "push_context_variable"
POP = "pop_context_variable"

_NAME = {"type": "string", "minLength": 1, "maxLength": 255, "description": "The variable's name."}
_VALUE = {"description": "Any JSON value: a string, number, boolean, null, object or array."}


def _schema(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


SCHEMAS: list[dict[str, Any]] = [
    _schema(
        PUT,
        "Set or replace a context variable, to keep data and share it with later steps "
        "of this workflow. Not for environment variables.",
        {"name": _NAME, "value": _VALUE},
        ["name", "value"],
    ),
    _schema(
        GET,
        "Read context variables. Answers a JSON object with an entry for every requested "
        "name (null when absent); without names, every variable.",
        {
            "names": {
                "type": "array",
                "items": _NAME,
                "description": "The names to read; omit for all.",
            }
        },
        [],
    ),
    _schema(
        PUSH,
        "Append a value to a list variable. An absent variable becomes a one-element list, "
        "a string variable becomes a list of that string and the value; other types are refused.",
        {"name": _NAME, "value": _VALUE},
        ["name", "value"],
    ),
    _schema(
        POP,
        "Remove and return a value: a string variable as a whole, or a list's last (LIFO, the "
        "default) or first (FIFO) element. An emptied list is removed; a list left with one "
        "string becomes that string.",
        {
            "name": _NAME,
            "mode": {"type": "string", "enum": ["LIFO", "FIFO"], "description": "LIFO or FIFO."},
        },
        ["name"],
    ),
]

_ALLOWED = {
    PUT: ({"name", "value"}, {"name", "value"}),
    GET: (set(), {"names"}),
    PUSH: ({"name", "value"}, {"name", "value"}),
    POP: ({"name"}, {"name", "mode"}),
}


def _arguments(tool: str, arguments: dict[str, Any] | str | None) -> dict[str, Any]:
    """The call's arguments as a checked dict; ``BadInput`` says what is wrong."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError) as error:
            raise BadInput(f"arguments are not valid JSON ({error}).") from None
    if not isinstance(arguments, dict):
        raise BadInput("arguments must be a JSON object.")
    required, allowed = _ALLOWED[tool]
    missing = sorted(required - set(arguments))
    if missing:
        raise BadInput(f"missing argument {missing[0]!r}.", field=missing[0])
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise BadInput(f"unknown argument {unknown[0]!r}.", field=unknown[0])
    if "name" in arguments:
        check_key(arguments["name"], "name")
    if "value" in arguments:
        check_json(arguments["value"], "value", agentstate_settings.MAX_JSON_DEPTH)
    names = arguments.get("names")
    if names is not None:
        if not isinstance(names, list):
            raise BadInput("names must be a list of strings.", field="names")
        for name in names:
            check_key(name, "names")
    return arguments


def _as_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _put(scope: str, args: dict[str, Any], owner: Owner, actor: str) -> str:
    context.put(scope, args["name"], args["value"], owner=owner, by=actor)
    return f"variable {args['name']} set"


def _get(scope: str, args: dict[str, Any], owner: Owner, actor: str) -> str:
    names = args.get("names") or None
    try:
        return _as_text(context.get(scope, names, owner=owner))
    except ScopeNotFound:
        # A scope nobody has written to yet simply has no variables.
        return _as_text(dict.fromkeys(names or ()))


def _push(scope: str, args: dict[str, Any], owner: Owner, actor: str) -> str:
    result = context.push(scope, args["name"], args["value"], owner=owner, by=actor)
    elements = "element" if result.length == 1 else "elements"
    return f"value pushed; variable {args['name']} now holds {result.length} {elements}"


def _pop(scope: str, args: dict[str, Any], owner: Owner, actor: str) -> str:
    value = context.pop(scope, args["name"], args.get("mode", "LIFO"), owner=owner, by=actor)
    return value if isinstance(value, str) else _as_text(value)


_HANDLERS: dict[str, Callable[[str, dict[str, Any], Owner, str], str]] = {
    PUT: _put,
    GET: _get,
    PUSH: _push,
    POP: _pop,
}


def dispatch(
    name: str,
    arguments: dict[str, Any] | str | None,
    *,
    scope: str,
    owner: Owner = None,
    actor: str = "",
) -> str:
    """Run tool ``name`` with ``arguments`` (a dict or a JSON string) on ``scope``.

    Always returns a message for the model, never raises (but for
    ``BaseException``s such as ``KeyboardInterrupt``).
    """
    handler = _HANDLERS.get(name) if isinstance(name, str) else None
    if handler is None:
        return f"error: unknown tool {name!r}; the tools are {', '.join(_HANDLERS)}"
    try:
        args = _arguments(name, arguments)
        return handler(scope, args, owner, actor)
    except BadInput as error:
        return f"error: invalid arguments: {error.detail}"
    except (ScopeNotFound, VariableNotFound):
        return f"no variable {args['name']} in scope {scope}"
    except AgentStateError as error:
        return f"error: {error.detail}"
    except DatabaseError:
        logger.warning("context tool %s failed on scope %r", name, scope, exc_info=True)
        return "error: the context store is unavailable; nothing was changed, try again later"
    except Exception as error:
        logger.exception("context tool %s failed on scope %r", name, scope)
        return f"error: {type(error).__name__}: {error}"
