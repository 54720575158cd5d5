"""Context variables: every rule of the docs' "Context variables" page, one function each.

A scope is named by its key and its owner (a user, or ``None`` for the
site's own namespace). The functions check their arguments and leave the
storing to the database's backend (``agentstate.backends``), which makes
each compound operation atomic across processes: writes lock the variable's
row, and lists are element rows between ``head`` and ``tail``, so push and
pop touch one element whatever the length.
"""

import logging
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.base_user import AbstractBaseUser

from agentstate.backends import backend
from agentstate.exceptions import BadInput, ScopeNotFound
from agentstate.models import Scope
from agentstate.validation import check_json, check_key

from .acting import By, acting, takes_by

logger = logging.getLogger(__name__)

# A scope's owner: a user, a username (looked up by the operation itself) or
# None, the site's own namespace.
Owner = AbstractBaseUser | str | None
MODES = ("LIFO", "FIFO")
MAX_VERSION = 2**63 - 1  # what a version column holds


@dataclass(frozen=True)
class PutResult:
    scope: str
    name: str
    value: Any
    version: int


@dataclass(frozen=True)
class PushResult:
    scope: str
    name: str
    length: int
    version: int


def _owner_id(owner: Owner) -> int | str | None:
    return owner if owner is None or isinstance(owner, str) else owner.pk


def _name(by: By) -> str:
    """Who changed a variable, as its ``updated_by`` keeps it: a name, or a username."""
    return acting(by).name


def find_scope(key: str, owner: AbstractBaseUser | None = None) -> Scope:
    # Any AUTH_USER_MODEL's user; the plugin knows only the test settings' User.
    scope = Scope.objects.filter(key=key, owner=owner).first()  # type: ignore[misc]
    if scope is None:
        raise ScopeNotFound.of(scope=key)
    return scope


def _check_args(scope: str, *names: str) -> None:
    check_key(scope, "scope")
    for name in names:
        check_key(name, "name")


@takes_by("actor")
def put(
    scope: str,
    name: str,
    value: Any,
    *,
    if_version: int | None = None,
    owner: Owner = None,
    by: By = None,
) -> PutResult:
    """Store ``value`` as it is; with ``if_version``, only over that version (0: absent)."""
    _check_args(scope, name)
    check_json(value, "value")
    if isinstance(value, tuple):
        value = list(value)
    if if_version is not None and (
        isinstance(if_version, bool)
        or not isinstance(if_version, int)
        or not 0 <= if_version <= MAX_VERSION
    ):
        raise BadInput("if_version must be an integer from 0 to 2**63 - 1.", field="if_version")
    version = backend().put(scope, name, value, if_version, _owner_id(owner), _name(by))
    return PutResult(scope, name, value, version)


def _present(scope: str, names: list[str] | None, owner: Owner) -> dict[str, Any]:
    """The stored values of ``names`` (all when empty), absent ones left out."""
    if isinstance(names, str):
        raise BadInput("names must be a list of names, not one string.", field="name")
    _check_args(scope, *(names or ()))
    return backend().get(scope, list(names) if names else None, _owner_id(owner))


def get(scope: str, names: list[str] | None = None, *, owner: Owner = None) -> dict[str, Any]:
    """A map with an entry for every requested name (``None`` when absent); no names: all."""
    values = _present(scope, names, owner)
    if names:
        return {name: values.get(name) for name in names}
    return values


@takes_by("actor")
def push(scope: str, name: str, value: Any, *, owner: Owner = None, by: By = None) -> PushResult:
    """Append ``value``; absent becomes ``[value]``, a string ``s`` becomes ``[s, value]``."""
    _check_args(scope, name)
    check_json(value, "value")
    length, version = backend().push(scope, name, value, _owner_id(owner), _name(by))
    return PushResult(scope, name, length, version)


@takes_by("actor")
def extend(
    scope: str,
    name: str,
    values: list[Any] | tuple[Any, ...],
    *,
    owner: Owner = None,
    by: By = None,
) -> PushResult:
    """Append each of ``values`` (a non-empty list) as one element, in order, in one
    atomic step: no other writer's element lands between them. Absent becomes
    ``values``, a string ``s`` becomes ``[s, *values]``; the version grows by one."""
    _check_args(scope, name)
    if isinstance(values, tuple):
        values = list(values)
    if not isinstance(values, list) or not values:
        raise BadInput("values must be a non-empty list.", field="values")
    check_json(values, "values")
    length, version = backend().extend(scope, name, values, _owner_id(owner), _name(by))
    return PushResult(scope, name, length, version)


@dataclass(frozen=True)
class ListResult:
    scope: str
    name: str
    values: list[Any]
    length: int


def check_last(last: Any) -> int | None:
    """``last`` as ``get_list`` takes it: ``None``, or an integer from 1 to 2**63 - 1."""
    if last is not None and (
        isinstance(last, bool) or not isinstance(last, int) or not 1 <= last <= MAX_VERSION
    ):
        raise BadInput("last must be an integer from 1 to 2**63 - 1.", field="last")
    return last


def get_list(scope: str, name: str, *, last: int | None = None, owner: Owner = None) -> ListResult:
    """A list's elements in order, only its last ``last`` when given (read from the
    list's tail: the cost grows with ``last``, not with the list), and the list's
    whole ``length``. A string reads as a one-element list; an absent variable is
    ``VariableNotFound``, an unknown scope ``ScopeNotFound``, any other value
    ``TypeConflict``."""
    _check_args(scope, name)
    check_last(last)
    values, length = backend().get_list(scope, name, last, _owner_id(owner))
    return ListResult(scope, name, values, length)


def _check_mode(mode: Any) -> str:
    if not isinstance(mode, str) or mode.upper() not in MODES:
        raise BadInput("mode must be 'LIFO' or 'FIFO'.", field="mode")
    return mode.upper()


@takes_by("actor")
def pop(scope: str, name: str, mode: str = "LIFO", *, owner: Owner = None, by: By = None) -> Any:
    """Remove and return a string, or a list's last (LIFO) or first (FIFO) element.

    An emptied list removes the variable; a list left with one string
    collapses to that string.
    """
    _check_args(scope, name)
    lifo = _check_mode(mode) == "LIFO"
    return backend().pop(scope, name, lifo, _owner_id(owner), _name(by))


def delete(scope: str, name: str, *, owner: Owner = None) -> None:
    _check_args(scope, name)
    backend().delete(scope, name, _owner_id(owner))


def delete_scope(scope: str, *, owner: Owner = None) -> None:
    _check_args(scope)
    backend().delete_scope(scope, _owner_id(owner))


def get_state(scope: str, key: str, default: Any = None, *, owner: Owner = None) -> Any:
    """The value, or ``default`` when absent, the scope unknown or the store unreachable."""
    try:
        return _present(scope, [key], owner).get(key, default)
    except ScopeNotFound:
        return default
    except Exception:
        logger.warning("get_state(%r, %r) failed; returning the default", scope, key, exc_info=True)
        return default


@takes_by("actor")
def set_state(scope: str, key: str, value: Any, *, owner: Owner = None, by: By = None) -> PutResult:
    """Like ``put``, raising on any failure: a lost write is never silent."""
    return put(scope, key, value, owner=owner, by=by)


# The async forms, for async callers (agent frameworks): each runs its function in
# Django's thread for the database, so the event loop never waits on it.
aput = sync_to_async(put)
aget = sync_to_async(get)
apush = sync_to_async(push)
apop = sync_to_async(pop)
aget_list = sync_to_async(get_list)
aextend = sync_to_async(extend)
adelete = sync_to_async(delete)
adelete_scope = sync_to_async(delete_scope)
aget_state = sync_to_async(get_state)
aset_state = sync_to_async(set_state)
