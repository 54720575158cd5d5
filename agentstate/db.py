"""Database helpers shared by the backends: transactions, retries, rows as models."""

import functools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from django.db import (
    IntegrityError,
    OperationalError,
    connection,
    connections,
    models,
    transaction,
)
from django.db.models import DEFERRED
from django.db.models.sql import Query

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


def _placeholder(arg: Any) -> str:
    if isinstance(arg, Json):
        return "%s::jsonb"
    if isinstance(arg, list):
        return "%s::text[]"
    return "%s"


def call(alias: str, function: str, *args: Any) -> Any:
    """One call of a database function returning JSON: its result, decoded.

    ``Json`` arguments go as ``jsonb``, lists as ``text[]``.

    Its own transaction in autocommit, run again when it lost a race
    (``is_retryable``); inside a caller's transaction, a savepoint of it, so
    that an error leaves the caller's transaction usable.
    """
    placeholders = ", ".join(_placeholder(a) for a in args)
    params = [
        json.dumps(a.value, allow_nan=False, ensure_ascii=False) if isinstance(a, Json) else a
        for a in args
    ]
    sql = f"SELECT {function}({placeholders})"
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


def _fetch(connection: Any, sql: str, params: list[Any]) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        (result,) = cursor.fetchone()
    return json.loads(result) if isinstance(result, str | bytes) else result


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
    return {field.column: field for field in model._meta.concrete_fields if field.column}


def _is_transient(error: Exception) -> bool:
    """A deadlock, a serialization failure or a row removed under us."""
    if isinstance(error, IntegrityError):
        return True
    cause = getattr(error, "__cause__", None)
    sqlstate = getattr(cause, "sqlstate", None)
    return sqlstate in {"40001", "40P01"}


def atomic_retry(func: Callable[P, R]) -> Callable[P, R]:
    """Run ``func`` in one transaction, retried when it lost a race.

    Inside an enclosing transaction there is nothing to retry (the caller's
    transaction is already broken), so the error goes up unchanged; the
    function still runs in a savepoint, so a refusal raised halfway leaves
    none of its writes in the caller's transaction.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if connection.in_atomic_block:
            with transaction.atomic():
                return func(*args, **kwargs)
        for attempt in range(ATTEMPTS):
            try:
                with transaction.atomic():
                    return func(*args, **kwargs)
            except (IntegrityError, OperationalError) as error:
                if attempt == ATTEMPTS - 1 or not _is_transient(error):
                    raise
        raise AssertionError("unreachable")

    return wrapper


def in_postgresql_autocommit() -> bool:
    """Whether a statement here is its own transaction on PostgreSQL: where a
    one-statement path may stand in for a transaction, and an error in it
    (a path that undoes itself) breaks no enclosing transaction."""
    return connection.vendor == "postgresql" and not connection.in_atomic_block


@contextmanager
def snapshot() -> Iterator[None]:
    """A read-only transaction whose queries all see one state.

    PostgreSQL: REPEATABLE READ for this transaction (no locks taken). SQLite:
    the transaction itself serializes against writers.
    """
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def returned(
    model: type[M], sql: str, params: list[Any], extra: models.Field | None = None
) -> list[M]:
    """The ``model`` rows a raw statement returns (``RETURNING *``, say).

    What ``Model.objects.raw`` does, without its per-call planning: each
    column of the model becomes its field's value through the field's and the
    backend's converters; any other column becomes an attribute of that name,
    converted as ``extra``'s values are when given.
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        names = [column[0] for column in cursor.description]
        rows = cursor.fetchall()
    converters = _converters(model, connection.alias)
    extra_expression, extra_convert = (
        (None, ()) if extra is None else _field_converters(extra, connection.alias)
    )
    instances = []
    for row in rows:
        values, extras = {}, {}
        for name, value in zip(names, row, strict=True):
            if name not in converters:
                for converter in extra_convert:
                    value = converter(value, extra_expression, connection)
                extras[name] = value
                continue
            attname, expression, convert = converters[name]
            for converter in convert:
                value = converter(value, expression, connection)
            values[attname] = value
        instance = model.from_db(
            connection.alias,
            list(values),
            [values.get(f.attname, DEFERRED) for f in model._meta.concrete_fields],
        )
        instance.__dict__.update(extras)
        instances.append(instance)
    return instances


@functools.cache
def _converters(model: type[models.Model], alias: str) -> dict[str, tuple[str, Any, list]]:
    """Per column of ``model``: its attname, its expression and its converters."""
    return {
        field.column: (field.attname, *_field_converters(field, alias))
        for field in model._meta.concrete_fields
        if field.column
    }


@functools.cache
def _field_converters(field: models.Field, alias: str) -> tuple[Any, list]:
    """A field's column expression and the converters its database values go through."""
    expression = field.get_col(field.model._meta.db_table)
    backend = connections[alias].ops.get_db_converters(expression)
    return expression, [*backend, *field.get_db_converters(connections[alias])]


def prepared(model: type[models.Model], values: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """The columns of ``values`` (keyed by ``model``'s field names or attnames) and
    the values as the database takes them, for a raw INSERT or UPDATE."""
    fields = [_concrete(model, name) for name in values]
    return [f.column or f.attname for f in fields], [
        f.get_db_prep_save(value, connection)
        for f, value in zip(fields, values.values(), strict=True)
    ]


def sql_of(expression: Any, model: type[models.Model]) -> tuple[str, list[Any]]:
    """A database expression (the clock, an expiry) as SQL and params for a raw
    statement on ``model``'s table."""
    query = Query(model)
    sql, params = query.get_compiler(connection=connection).compile(
        expression.resolve_expression(query)
    )
    return sql, list(params)


def _concrete(model: type[models.Model], name: str) -> models.Field:
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field), f"{name} is not a column of {model.__name__}"
    return field
