"""Database helpers shared by the backends: transactions, retries, rows as models."""

import functools
import json
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

from django.db import (
    OperationalError,
    connections,
    models,
    transaction,
)
from django.db.models import DEFERRED

P = ParamSpec("P")
R = TypeVar("R")
M = TypeVar("M", bound=models.Model)

ATTEMPTS = 5
# A serialization failure and a deadlock: the only errors worth running again.
RETRIED_SQLSTATES = frozenset({"40001", "40P01"})


def is_retryable(error: Exception) -> bool:
    """A serialization failure or deadlock (PostgreSQL), or SQLite's busy error;
    never a constraint violation."""
    if not isinstance(error, OperationalError):
        return False
    if getattr(error.__cause__, "sqlstate", None) in RETRIED_SQLSTATES:
        return True
    return "database is locked" in str(error) or "database table is locked" in str(error)


def atomic(alias: str, func: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``func`` in one transaction on ``alias``, run again when it lost a race
    (``is_retryable``). Inside a caller's transaction there is nothing to run
    again: ``func`` runs in a savepoint, so a refusal leaves none of its writes."""
    if connections[alias].in_atomic_block:
        with transaction.atomic(using=alias):
            return func(*args, **kwargs)
    for attempt in range(ATTEMPTS):
        try:
            with transaction.atomic(using=alias):
                return func(*args, **kwargs)
        except OperationalError as error:
            if attempt == ATTEMPTS - 1 or not is_retryable(error):
                raise
    raise AssertionError("unreachable")


class Json:
    """A parameter that the database takes as JSON (``jsonb`` on PostgreSQL)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Array:
    """A parameter that the database takes as an array of ``type`` (``bytea``, say)."""

    __slots__ = ("type", "values")

    def __init__(self, values: list[Any], type: str) -> None:
        self.values = values
        self.type = type


def _placeholder(arg: Any) -> str:
    if isinstance(arg, Json):
        return "%s::jsonb"
    if isinstance(arg, Array):
        return f"%s::{arg.type}[]"
    if isinstance(arg, list):
        return "%s::text[]"
    return "%s"


def call(alias: str, function: str, **params: Any) -> Any:
    """One call of a database function returning JSON: its result, decoded.

    Each argument goes by its parameter's name (``f(p_name => %s)``), so that
    a call reads as the function's signature and cannot swap two of the same
    type. ``Json`` arguments go as ``jsonb``, lists as ``text[]``.

    Its own transaction in autocommit, run again when it lost a race
    (``is_retryable``); inside a caller's transaction, a savepoint of it, so
    that an error leaves the caller's transaction usable.
    """
    row = _run(alias, f"SELECT {function}({_arguments(params)})", _params(params))
    assert row is not None
    (result,) = row
    return json.loads(result) if isinstance(result, str | bytes) else result


def call_row(alias: str, function: str, **params: Any) -> tuple[Any, ...] | None:
    """The first row of a set-returning database function (``None``: no row), its
    columns as the driver decodes them; the arguments and the transaction as
    ``call``'s."""
    return _run(alias, f"SELECT * FROM {function}({_arguments(params)})", _params(params))


def _arguments(params: dict[str, Any]) -> str:
    return ", ".join(f"{name} => {_placeholder(arg)}" for name, arg in params.items())


def _params(params: dict[str, Any]) -> list[Any]:
    return [
        json.dumps(a.value, allow_nan=False, ensure_ascii=False)
        if isinstance(a, Json)
        else a.values
        if isinstance(a, Array)
        else a
        for a in params.values()
    ]


def _run(alias: str, sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    connection = connections[alias]
    if connection.in_atomic_block:
        with transaction.atomic(using=alias):
            return _fetch(connection, sql, params)
    for attempt in range(ATTEMPTS):
        try:
            return _fetch(connection, sql, params)
        except OperationalError as error:
            if attempt == ATTEMPTS - 1 or not is_retryable(error):
                raise
    raise AssertionError("unreachable")


def _fetch(connection: Any, sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row: tuple[Any, ...] | None = cursor.fetchone()
    return row


def from_json(model: type[M], row: dict[str, Any], alias: str = "default") -> M:
    """A ``model`` instance from a row as JSON (PostgreSQL's ``to_jsonb(row)``),
    each column through its field's ``to_python``; keys that are no column
    become attributes (``current_status``, say)."""
    fields = _columns(model)
    values = {}
    extras = {}
    for key, value in row.items():
        field = fields.get(key)
        if field is None:
            extras[key] = value
        else:
            values[field.attname] = None if value is None else field.to_python(value)
    names = [f.attname for f in model._meta.concrete_fields]
    instance = model.from_db(alias, names, [values.get(name, DEFERRED) for name in names])
    instance.__dict__.update(extras)
    return instance


@functools.cache
def _columns(model: type[models.Model]) -> dict[str, models.Field]:
    # A concrete field is one with a column.
    return {cast(str, field.column): field for field in model._meta.concrete_fields}


def group_membership() -> list[str] | None:
    """Where the site's user model keeps its groups: ``[table, user column, group
    column]`` of the membership table, or ``None`` when it has no ``groups``."""
    from django.contrib.auth import get_user_model
    from django.core.exceptions import FieldDoesNotExist

    try:
        field = get_user_model()._meta.get_field("groups")
    except FieldDoesNotExist:  # a user model without PermissionsMixin
        return None
    groups = cast(models.ManyToManyField, field)
    return [groups.m2m_db_table(), groups.m2m_column_name(), groups.m2m_reverse_name()]
