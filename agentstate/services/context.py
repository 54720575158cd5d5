"""Context variables: every rule of SPEC section 1, one function each.

A scope is named by its key and its owner (a user, or ``None`` for the
site's own namespace). Writes lock the variable's row (``SELECT ... FOR
UPDATE`` on PostgreSQL; SQLite's IMMEDIATE transactions serialize writers),
so compound operations are atomic across processes. Lists are ``Element``
rows between ``head`` and ``tail``: push and pop touch one element whatever
the length.
"""

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import DataError, IntegrityError, OperationalError, connection
from django.utils import timezone

from agentstate.db import atomic_retry, in_postgresql_autocommit, snapshot
from agentstate.exceptions import (
    BadInput,
    ScopeNotFound,
    TypeConflict,
    VariableNotFound,
    VersionMismatch,
)
from agentstate.models import Element, Scope, Variable
from agentstate.validation import check_json, check_key

logger = logging.getLogger(__name__)

_ELEMENT_VALUE = Element._meta.get_field("value")
_VARIABLE_VALUE = Variable._meta.get_field("value")

Owner = AbstractBaseUser | None
MODES = ("LIFO", "FIFO")


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


def _owner_filter(owner: Owner) -> dict[str, Any]:
    return {"owner__isnull": True} if owner is None else {"owner": owner}


def find_scope(key: str, owner: Owner = None) -> Scope:
    scope = Scope.objects.filter(key=key, **_owner_filter(owner)).first()
    if scope is None:
        raise ScopeNotFound(f"Scope {key!r} not found.")
    return scope


def _ensure_scope(key: str, owner: Owner) -> Scope:
    try:
        return find_scope(key, owner)
    except ScopeNotFound:
        Scope.objects.bulk_create([Scope(key=key, owner=owner)], ignore_conflicts=True)
        return find_scope(key, owner)


def _locked(scope: Scope, name: str) -> Variable | None:
    return Variable.objects.select_for_update().filter(scope=scope, name=name).first()


def _lock_or_create(scope: Scope, name: str, *, is_list: bool) -> Variable:
    """The variable's row, locked; a new one is created at version 0.

    Version 0 is only ever seen inside the creating transaction: every caller
    changes the variable before it commits. An absent variable is created by
    an upsert (``INSERT ... ON CONFLICT DO UPDATE``), which leaves the row
    locked by this transaction whether it inserted it or met a racing
    creator's: a pop removing the row meanwhile cannot make creation retry
    (or starve) the way ``SELECT``-then-``INSERT`` would.
    """
    variable = _locked(scope, name)
    if variable is None:
        Variable.objects.bulk_create(
            [Variable(scope=scope, name=name, is_list=is_list, version=0)],
            update_conflicts=True,
            unique_fields=["scope", "name"],
            update_fields=["name"],
        )
        variable = _locked(scope, name)
    if variable is None:  # pragma: no cover - the upsert holds the row's lock
        raise OperationalError(f"Variable {name!r} vanished while it was being created.")
    return variable


def _save(variable: Variable, actor: str, *fields: str) -> None:
    variable.version += 1
    variable.updated_by = actor
    variable.save(update_fields=["version", "updated_by", "updated_at", *fields])


def _list_values(variables: list[Variable]) -> dict[int, list[Any]]:
    lists: dict[int, list[Any]] = {v.pk: [] for v in variables if v.is_list}
    if lists:
        elements = (
            Element.objects.filter(variable_id__in=lists)
            .order_by("variable_id", "position")
            .values_list("variable_id", "value")
        )
        for variable_id, value in elements.iterator(chunk_size=2000):
            lists[variable_id].append(value)
    return lists


def _check_args(scope: str, *names: str) -> None:
    check_key(scope, "scope")
    for name in names:
        check_key(name, "name")


def put(
    scope: str,
    name: str,
    value: Any,
    *,
    if_version: int | None = None,
    owner: Owner = None,
    actor: str = "",
) -> PutResult:
    """Store ``value`` as it is; with ``if_version``, only over that version (0: absent)."""
    _check_args(scope, name)
    check_json(value, "value")
    if isinstance(value, tuple):
        value = list(value)
    if if_version is not None and (
        isinstance(if_version, bool) or not isinstance(if_version, int) or if_version < 0
    ):
        raise BadInput("if_version must be a non-negative integer.", field="if_version")
    if if_version is None and not isinstance(value, list) and not connection.in_atomic_block:
        version = _replace_value(scope, name, value, owner, actor)
        if version is not None:
            return PutResult(scope, name, value, version)
    return _put(scope, name, value, if_version, owner, actor)


def _replace_value(scope: str, name: str, value: Any, owner: Owner, actor: str) -> int | None:
    """The common put in one statement (autocommit): a value that is no list over a
    variable that is none either, in an existing scope; the new version, or ``None``
    when that is not the case (nothing is written then).

    An upsert: it inserts the variable at version 1 or, under the row lock that
    ``ON CONFLICT DO UPDATE`` takes, replaces its value and increments its version.
    """
    table = Variable._meta.db_table
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (scope_id, name, is_list, value, head, tail, version,"
                f" updated_at, updated_by) SELECT id, %s, %s, %s, 0, 0, 1, %s, %s"
                f" FROM {Scope._meta.db_table} WHERE key = %s AND {_scope_owner(owner)}"
                f" ON CONFLICT (scope_id, name) DO UPDATE SET value = excluded.value,"
                f" version = {table}.version + 1, updated_at = excluded.updated_at,"
                f" updated_by = excluded.updated_by WHERE NOT {table}.is_list RETURNING version",
                [
                    name,
                    False,
                    _VARIABLE_VALUE.get_db_prep_save(value, connection),
                    _now(),
                    actor,
                    scope,
                    *_owner_pk(owner),
                ],
            )
            row = cursor.fetchone()
    except IntegrityError:  # the scope went away meanwhile: the general path decides
        return None
    return None if row is None else row[0]


@atomic_retry
def _put(
    scope: str, name: str, value: Any, if_version: int | None, owner: Owner, actor: str
) -> PutResult:
    variable = _lock_or_create(_ensure_scope(scope, owner), name, is_list=False)
    if if_version is not None and variable.version != if_version:
        raise VersionMismatch(
            f"Variable {name!r} is at version {variable.version}, not {if_version}."
        )
    if variable.is_list:
        variable.elements.all().delete()
    variable.is_list = isinstance(value, list)
    if variable.is_list:
        Element.objects.bulk_create(
            Element(variable=variable, position=i, value=item) for i, item in enumerate(value)
        )
        variable.value, variable.head, variable.tail = None, 0, len(value)
    else:
        variable.value, variable.head, variable.tail = value, 0, 0
    _save(variable, actor, "is_list", "value", "head", "tail")
    return PutResult(scope, name, value, variable.version)


def _present(scope: str, names: list[str] | None, owner: Owner) -> dict[str, Any]:
    """The stored values of ``names`` (all when empty), absent ones left out."""
    if isinstance(names, str):
        raise BadInput("names must be a list of names, not one string.", field="name")
    _check_args(scope, *(names or ()))
    found = _plain_values(scope, names, owner)
    if found is not None:
        return found
    with snapshot():
        variables = find_scope(scope, owner).variables.all()
        if names:
            variables = variables.filter(name__in=names)
        variables = list(variables)
        lists = _list_values(variables)
    return {v.name: lists[v.pk] if v.is_list else v.value for v in variables}


def _plain_values(scope: str, names: list[str] | None, owner: Owner) -> dict[str, Any] | None:
    """``_present`` in one statement when no list is among the variables, else ``None``."""
    table = Variable._meta.db_table
    among = f" AND v.name IN ({', '.join(['%s'] * len(names))})" if names else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT v.name, v.is_list, v.value FROM {Scope._meta.db_table} s"
            f" LEFT JOIN {table} v ON v.scope_id = s.id{among}"
            f" WHERE s.key = %s AND s.{_scope_owner(owner)} ORDER BY v.name",
            [*(names or ()), scope, *_owner_pk(owner)],
        )
        rows = cursor.fetchall()
    if not rows:
        raise ScopeNotFound(f"Scope {scope!r} not found.")
    if any(is_list for _, is_list, _ in rows):
        return None
    return {
        name: _VARIABLE_VALUE.from_db_value(value, None, connection)
        for name, _, value in rows
        if name is not None
    }


def get(scope: str, names: list[str] | None = None, *, owner: Owner = None) -> dict[str, Any]:
    """A map with an entry for every requested name (``None`` when absent); no names: all."""
    values = _present(scope, names, owner)
    if names:
        return {name: values.get(name) for name in names}
    return values


def push(scope: str, name: str, value: Any, *, owner: Owner = None, actor: str = "") -> PushResult:
    """Append ``value``; absent becomes ``[value]``, a string ``s`` becomes ``[s, value]``."""
    _check_args(scope, name)
    check_json(value, "value")
    if in_postgresql_autocommit():
        appended = _append_in_one_statement(scope, name, value, owner, actor)
        if appended is not None:
            return appended
    return _push(scope, name, value, owner, actor)


@atomic_retry
def _push(scope: str, name: str, value: Any, owner: Owner, actor: str) -> PushResult:
    appended = _append_to_list(scope, name, value, owner, actor)
    if appended is not None:
        return appended
    variable = _lock_or_create(_ensure_scope(scope, owner), name, is_list=True)
    if not variable.is_list:
        if not isinstance(variable.value, str):
            raise TypeConflict(
                f"Variable {name!r} holds a {_json_type(variable.value)}; push needs a list or a string."
            )
        Element.objects.create(variable=variable, position=0, value=variable.value)
        variable.is_list, variable.value, variable.head, variable.tail = True, None, 0, 1
    Element.objects.create(variable=variable, position=variable.tail, value=value)
    variable.tail += 1
    _save(variable, actor, "is_list", "value", "head", "tail")
    return PushResult(scope, name, variable.length, variable.version)


# The common cases of push and pop in two statements and no ORM: the UPDATE
# takes the variable's row lock and moves its bounds, the second statement
# adds or removes the element. They only apply to a list (and for pop, to
# one that stays at two elements or more, so that no collapse or removal
# rule is involved); anything else falls through to the general path, in the
# same transaction. The DELETE must be its own statement: under READ
# COMMITTED it then sees an element that a push committed while this
# transaction waited for the lock.

_MISSED = object()


def _scope_owner(owner: Owner) -> str:
    return "owner_id IS NULL" if owner is None else "owner_id = %s"


def _owner_pk(owner: Owner) -> list[Any]:
    return [] if owner is None else [owner.pk]


def _now() -> Any:
    return connection.ops.adapt_datetimefield_value(timezone.now())


def _variable_update(moves: str, returning: str, owner: Owner) -> str:
    return (
        f"UPDATE {Variable._meta.db_table} SET {moves}, version = version + 1, "
        "updated_by = %s, updated_at = %s "
        "WHERE is_list = %s AND name = %s AND tail - head >= %s AND scope_id = ("
        f"SELECT id FROM {Scope._meta.db_table} WHERE key = %s AND {_scope_owner(owner)}) "
        f"RETURNING {returning}"
    )


def _update_params(actor: str, name: str, min_length: int, scope: str, owner: Owner) -> list[Any]:
    return [actor, _now(), True, name, min_length, scope, *_owner_pk(owner)]


def _append_to_list(
    scope: str, name: str, value: Any, owner: Owner, actor: str
) -> PushResult | None:
    """Push onto an existing list; ``None`` when the variable is not one."""
    with connection.cursor() as cursor:
        cursor.execute(
            _variable_update("tail = tail + 1", "id, head, tail, version", owner),
            _update_params(actor, name, 0, scope, owner),
        )
        row = cursor.fetchone()
        if row is None:
            return None
        pk, head, tail, version = row
        cursor.execute(
            f"INSERT INTO {Element._meta.db_table} (variable_id, position, value) VALUES (%s, %s, %s)",
            [pk, tail - 1, _ELEMENT_VALUE.get_db_prep_save(value, connection)],
        )
    return PushResult(scope, name, tail - head, version)


def _append_in_one_statement(
    scope: str, name: str, value: Any, owner: Owner, actor: str
) -> PushResult | None:
    """``_append_to_list`` as one PostgreSQL statement in autocommit: no transaction to open."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH v AS ({_variable_update('tail = tail + 1', 'id, head, tail, version', owner)}),"
            f" e AS (INSERT INTO {Element._meta.db_table} (variable_id, position, value)"
            " SELECT id, tail - 1, %s FROM v) SELECT head, tail, version FROM v",
            [
                *_update_params(actor, name, 0, scope, owner),
                _ELEMENT_VALUE.get_db_prep_save(value, connection),
            ],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    head, tail, version = row
    return PushResult(scope, name, tail - head, version)


def _pop_moves(mode: str) -> tuple[str, str]:
    """How a pop moves the bounds, and where the element it takes was."""
    if mode == "LIFO":
        return "tail = tail - 1", "tail AS position"
    return "head = head + 1", "head - 1 AS position"


def _take_from_long_list(scope: str, name: str, mode: str, owner: Owner, actor: str) -> Any:
    """Pop from a list of three or more elements; ``_MISSED`` otherwise."""
    moves, position = _pop_moves(mode)
    with connection.cursor() as cursor:
        cursor.execute(
            _variable_update(moves, f"id, {position}", owner),
            _update_params(actor, name, 3, scope, owner),
        )
        row = cursor.fetchone()
        if row is None:
            return _MISSED
        cursor.execute(
            f"DELETE FROM {Element._meta.db_table} WHERE variable_id = %s AND position = %s RETURNING value",
            list(row),
        )
        (value,) = cursor.fetchone()
    return _ELEMENT_VALUE.from_db_value(value, None, connection)


# The DELETE of a one-statement pop sees the statement's snapshot: an element
# that a push committed while the UPDATE waited for the row lock is not in it.
# The statement then divides by the number of elements it deleted, zero, and
# the error undoes it whole; the transactional path takes over.
_DIVISION_BY_ZERO = "22012"


def _take_in_one_statement(scope: str, name: str, mode: str, owner: Owner, actor: str) -> Any:
    """``_take_from_long_list`` as one PostgreSQL statement in autocommit."""
    moves, position = _pop_moves(mode)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                f"WITH v AS ({_variable_update(moves, f'id, {position}', owner)}),"
                f" d AS (DELETE FROM {Element._meta.db_table} e USING v"
                " WHERE e.variable_id = v.id AND e.position = v.position RETURNING e.value)"
                " SELECT (SELECT value FROM d), 1 / (SELECT count(*) FROM d) FROM v",
                _update_params(actor, name, 3, scope, owner),
            )
            row = cursor.fetchone()
    except DataError as error:
        if getattr(error.__cause__, "sqlstate", None) != _DIVISION_BY_ZERO:
            raise
        return _MISSED
    return _MISSED if row is None else _ELEMENT_VALUE.from_db_value(row[0], None, connection)


def _check_mode(mode: Any) -> str:
    if not isinstance(mode, str) or mode.upper() not in MODES:
        raise BadInput("mode must be 'LIFO' or 'FIFO'.", field="mode")
    return mode.upper()


def pop(scope: str, name: str, mode: str = "LIFO", *, owner: Owner = None, actor: str = "") -> Any:
    """Remove and return a string, or a list's last (LIFO) or first (FIFO) element.

    An emptied list removes the variable; a list left with one string
    collapses to that string.
    """
    _check_args(scope, name)
    mode = _check_mode(mode)
    if in_postgresql_autocommit():
        taken = _take_in_one_statement(scope, name, mode, owner, actor)
        if taken is not _MISSED:
            return taken
    return _pop(scope, name, mode, owner, actor)


@atomic_retry
def _pop(scope: str, name: str, mode: str, owner: Owner, actor: str) -> Any:
    taken = _take_from_long_list(scope, name, mode, owner, actor)
    if taken is not _MISSED:
        return taken
    variable = _locked(find_scope(scope, owner), name)
    if variable is None:
        raise VariableNotFound(f"No variable {name!r} in scope {scope!r}.")
    if not variable.is_list:
        if not isinstance(variable.value, str):
            raise TypeConflict(
                f"Variable {name!r} holds a {_json_type(variable.value)}; pop needs a list or a string."
            )
        variable.delete()
        return variable.value
    if variable.length == 0:
        raise TypeConflict(f"Variable {name!r} is an empty list.")
    position = variable.tail - 1 if mode == "LIFO" else variable.head
    element = Element.objects.get(variable=variable, position=position)
    element.delete()
    if mode == "LIFO":
        variable.tail -= 1
    else:
        variable.head += 1
    if variable.length == 0:
        variable.delete()
        return element.value
    if variable.length == 1:
        last = Element.objects.get(variable=variable, position=variable.head)
        if isinstance(last.value, str):
            last.delete()
            variable.is_list, variable.value, variable.head, variable.tail = False, last.value, 0, 0
    _save(variable, actor, "is_list", "value", "head", "tail")
    return element.value


@atomic_retry
def delete(scope: str, name: str, *, owner: Owner = None) -> None:
    _check_args(scope, name)
    deleted, _ = Variable.objects.filter(scope=find_scope(scope, owner), name=name).delete()
    if not deleted:
        raise VariableNotFound(f"No variable {name!r} in scope {scope!r}.")


@atomic_retry
def delete_scope(scope: str, *, owner: Owner = None) -> None:
    _check_args(scope)
    find_scope(scope, owner).delete()


def get_state(scope: str, key: str, default: Any = None, *, owner: Owner = None) -> Any:
    """The value, or ``default`` when absent, the scope unknown or the store unreachable."""
    try:
        return _present(scope, [key], owner).get(key, default)
    except ScopeNotFound:
        return default
    except Exception:
        logger.warning("get_state(%r, %r) failed; returning the default", scope, key, exc_info=True)
        return default


def set_state(
    scope: str, key: str, value: Any, *, owner: Owner = None, actor: str = ""
) -> PutResult:
    """Like ``put``, raising on any failure: a lost write is never silent."""
    return put(scope, key, value, owner=owner, actor=actor)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {dict: "object", list: "array", str: "string"}.get(type(value), type(value).__name__)
