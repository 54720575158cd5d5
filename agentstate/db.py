"""Database helpers shared by the backends: transactions, retries, rows as models."""

import functools
import json
import os
import random
import threading
import time
from _thread import get_ident
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ParamSpec, TypeVar, cast

from django.db import (
    DEFAULT_DB_ALIAS,
    OperationalError,
    connections,
    models,
    transaction,
)
from django.db.backends import utils as django_cursors
from django.db.models import DEFERRED, Count, Window, signals
from django.db.models.base import ModelState
from django.db.models.functions import Now
from django.db.models.sql import Query
from django.utils import timezone
from django.utils.asyncio import async_unsafe

P = ParamSpec("P")
R = TypeVar("R")
M = TypeVar("M", bound=models.Model)

ATTEMPTS = 5
# The first retry waits up to this many seconds, each next one up to twice as long.
BACKOFF = 0.005
# The only errors worth running again: a serialization failure and a deadlock
# (PostgreSQL's SQLSTATEs), a deadlock and a lock wait timeout (MySQL's and
# MariaDB's error numbers), SQLite's busy errors. Never a constraint violation.
RETRIED_SQLSTATES = frozenset({"40001", "40P01"})
RETRIED_MYSQL_ERRORS = frozenset({1213, 1205})
SQLITE_BUSY = ("database is locked", "database table is locked")


def is_retryable(error: Exception) -> bool:
    """Whether ``error`` lost a race that running the transaction again can win
    (``RETRIED_*``); never a constraint violation."""
    if not isinstance(error, OperationalError):
        return False
    if getattr(error.__cause__, "sqlstate", None) in RETRIED_SQLSTATES:
        return True
    # mysqlclient's errors, and Django's copies of them, carry (number, message)
    if error.args and error.args[0] in RETRIED_MYSQL_ERRORS:
        return True
    return any(busy in str(error) for busy in SQLITE_BUSY)


def atomic(alias: str, func: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``func`` in one transaction on ``alias``, run again when it lost a race
    (``is_retryable``). Inside a caller's transaction there is nothing to run
    again: ``func`` runs in a savepoint, so a refusal leaves none of its writes."""

    def once() -> R:
        with transaction.atomic(using=alias):
            return func(*args, **kwargs)

    connection = connections[alias]
    if connection.in_atomic_block:
        return once()
    if connection.vendor == "sqlite":
        return retried(lambda: in_turn(connection, once))
    return retried(once)


# One lock per SQLite database of this process (by alias); a forked child (a
# server's worker) starts with none, whatever thread of its parent held one.
_TURNS: dict[str, threading.Lock] = {}
os.register_at_fork(after_in_child=_TURNS.clear)


def in_turn(connection: Any, func: Callable[[], R]) -> R:
    """``func()`` once the threads of this process that came first to write to
    ``connection``'s SQLite database are done.

    SQLite lets one transaction write at a time (``IMMEDIATE``: one at a time
    at all), and one that finds the database locked sleeps in the busy
    handler, up to 100 ms a try, whatever happens meanwhile: twenty threads
    writing at once spent most of their time asleep, and one could lose every
    try until its ``timeout``. Threads of one process queue on a lock instead
    and start the moment the one before commits; other processes (and writes
    outside this module) still meet the busy handler. Waiting longer than the
    connection's ``timeout``, the thread goes on without its turn, as it did
    before, and the busy handler decides."""
    turn = _TURNS.setdefault(connection.alias, threading.Lock())
    timeout = connection.settings_dict["OPTIONS"].get("timeout", 5)
    queued = turn.acquire(timeout=timeout)
    try:
        return func()
    finally:
        if queued:
            turn.release()


def retried(func: Callable[[], R]) -> R:
    """``func()``, run again (at most ``ATTEMPTS`` times in all) while it loses a race
    (``is_retryable``), after a random pause that doubles each time, so that the
    transactions that deadlocked do not meet again in step."""
    for attempt in range(ATTEMPTS):
        try:
            return func()
        except OperationalError as error:
            if attempt == ATTEMPTS - 1 or not is_retryable(error):
                raise
            time.sleep(random.uniform(0, BACKOFF * 2**attempt))
    raise AssertionError("unreachable")


# ``json.dumps(value, allow_nan=False, ensure_ascii=False)``'s encoder, made once
# rather than by each ``Json`` parameter
_JSON = json.JSONEncoder(allow_nan=False, ensure_ascii=False)


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


def call(alias: str, function: str, **params: Any) -> Any:
    """One call of a database function returning JSON: its result, decoded.

    Each argument goes by its parameter's name (``f(p_name => %s)``), so that
    a call reads as the function's signature and cannot swap two of the same
    type. ``Json`` arguments go as ``jsonb``, lists as ``text[]``.

    Its own transaction in autocommit, run again when it lost a race
    (``is_retryable``); inside a caller's transaction, a savepoint of it, so
    that an error leaves the caller's transaction usable.
    """
    arguments, values = _bound(params)
    row = _run(alias, _statement("SELECT {}({})", function, arguments), values)
    assert row is not None
    (result,) = row
    return decoded(result)


def decoded(value: Any) -> Any:
    """A ``json`` or ``jsonb`` column's value: Django's psycopg connection reads it
    as text, which is decoded here; a driver that decodes it gives it as it is."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def call_row(alias: str, function: str, **params: Any) -> tuple[Any, ...] | None:
    """The first row of a set-returning database function (``None``: no row), its
    columns as the driver decodes them; the arguments and the transaction as
    ``call``'s.

    The row comes in PostgreSQL's binary form where the call runs on psycopg's own
    cursor (``_fetch_direct``): a ``bytea`` or an array of them as its bytes, not
    as hex text to parse and decode, a ``jsonb`` decoded by the driver. Through
    Django's cursor wrapper it comes as text, as Django reads it (a ``jsonb`` as
    its text): a caller takes either."""
    arguments, values = _bound(params)
    return cast(
        tuple[Any, ...] | None,
        _run(alias, _statement(_ROWS, function, arguments), values, binary=True),
    )


def call_rows(alias: str, function: str, **params: Any) -> list[tuple[Any, ...]]:
    """Every row of a set-returning database function; as ``call_row``."""
    arguments, values = _bound(params)
    return cast(
        list[tuple[Any, ...]],
        _run(alias, _statement(_ROWS, function, arguments), values, True, binary=True),
    )


def _bound(params: dict[str, Any]) -> tuple[str, list[Any]]:
    """A call's argument list (``p_name => %s``, cast by the argument's kind) and its
    values, in one pass: ``Json`` as its text, ``Array`` as its list, a list as a
    ``text[]``'s text (``_text_array``), anything else as it is."""
    shape = []
    values: list[Any] = []
    for name, arg in params.items():
        kind = type(arg)
        if kind is Json:
            shape.append((name, "%s::jsonb"))
            values.append(_JSON.encode(arg.value))
        elif kind is Array:
            shape.append((name, f"%s::{arg.type}[]"))
            values.append(arg.values)
        elif isinstance(arg, list):
            shape.append((name, "%s::text[]"))
            values.append(_text_array(arg))
        else:
            shape.append((name, "%s"))
            values.append(arg)
    return _named(tuple(shape)), values


_ROWS = "SELECT * FROM {}({})"


@functools.lru_cache(maxsize=1024)
def _statement(form: str, function: str, arguments: str) -> str:
    """A call's statement, the same string object for each call of one shape: psycopg
    keeps a cursor's adaptation of the parameters (its ``Transformer``, with the
    dumpers it found) while the cursor runs the same object again (``_kept_cursor``)."""
    return form.format(function, arguments)


@functools.lru_cache(maxsize=1024)
def _named(arguments: tuple[tuple[str, str], ...]) -> str:
    """A call's argument list, made once per shape of call."""
    return ", ".join(f"{name} => {placeholder}" for name, placeholder in arguments)


def _text_array(values: list[Any]) -> str:
    """A list as the text of a ``text[]`` (each element quoted, ``None`` as NULL),
    which the statement casts: cheaper than the driver's own adaptation of a list,
    which looks for the dumper of its elements on every call."""
    return (
        "{"
        + ",".join(
            "NULL"
            if value is None
            else '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
            for value in values
        )
        + "}"
    )


def _run(alias: str, sql: str, params: list[Any], every: bool = False, binary: bool = False) -> Any:
    """The first row (``every``: all rows) of one statement, as ``call`` runs it
    (``binary``: its columns in binary form where it can, ``call_row``)."""
    connection = connections[alias]
    if connection.in_atomic_block:
        with transaction.atomic(using=alias):
            return _fetch(connection, sql, params, every, binary)
    return retried(lambda: _fetch(connection, sql, params, every, binary))


def _fetch(connection: Any, sql: str, params: list[Any], every: bool, binary: bool) -> Any:
    if connection.queries_logged or connection.execute_wrappers or _instrumented():
        # Django's cursor wrapper: the query log (DEBUG, CaptureQueriesContext), the
        # execute wrappers and a tool that patched the wrapper see the statement
        with cursor(connection) as c:
            c.execute(sql, params)
            return c.fetchall() if every else c.fetchone()
    return _fetch_direct(connection, sql, params, every, binary)


def _instrumented() -> bool:
    """Whether something replaced Django's ``CursorWrapper.execute`` (an APM agent,
    such as Sentry's, patches it to see every query)."""
    execute: Any = django_cursors.CursorWrapper.execute
    return bool(execute.__code__.co_filename != django_cursors.__file__)


@async_unsafe
def _fetch_direct(
    connection: Any, sql: str, params: list[Any], every: bool, binary: bool = False
) -> Any:
    """``_fetch`` on the driver's cursor itself, where nothing listens to Django's
    wrapper: the same checks, the same errors (``wrap_database_errors``), without
    the wrapper's layers (a wrapper per cursor, a context per statement, a wrapped
    function per fetch): a tenth to a fifth of a call's instructions in the process
    (a context ``get``: 273,000 to 216,000; Django's own loop of one SELECT: 182,000).

    ``binary``: the row in binary form, on a cursor binding on the server (a
    client-binding cursor cannot ask for it); the statement is prepared only where
    the connection prepares statements (``prepares``), as any other."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    connection.validate_no_broken_transaction()
    with connection.wrap_database_errors:
        driver = _kept_cursor(connection, binary)
        try:
            if binary:
                driver.execute(sql, params, binary=True)
            else:
                driver.execute(sql, params)
            return driver.fetchall() if every else driver.fetchone()
        except BaseException:
            _drop_cursor(connection, driver)
            raise


# Where a Django connection keeps its driver cursors for ``_fetch_direct``
_KEPT = "_agentstate_cursors"


def _kept_cursor(connection: Any, binding: bool) -> Any:
    """The driver's cursor ``_fetch_direct`` runs a call on (``_driver_cursor``'s kind),
    made once per psycopg connection and kept on the Django connection for the next
    call, rather than a new one per call: no new cursor's copy of the adapters, and
    psycopg keeps its adaptation of the parameters while the same statement runs again.

    A cursor is kept for the psycopg connection it was made on, the time zone Django's
    cursor was made for, and the thread that made it: after a reconnect (a new psycopg
    connection), a change of the connection's time zone, or a call from another
    thread (a connection shared between threads, ``inc_thread_sharing``, such as the
    LangGraph saver's lent ones), a new one is made and kept instead; two threads
    never run one cursor. The kept cursor holds its last call's rows until the next
    call on it, or until its connection closes."""
    driver_connection = connection.connection
    kind = binding or prepares(connection)
    kept = connection.__dict__.get(_KEPT)
    if kept is None:
        kept = connection.__dict__[_KEPT] = {}
    entry = kept.get(kind)
    timezone = connection.timezone
    thread = get_ident()
    if (
        entry is not None
        and entry[0] is driver_connection
        and entry[1] is timezone
        and entry[2] == thread
        and not entry[3].closed
    ):
        return entry[3]
    driver = _driver_cursor(connection, binding)
    kept[kind] = (driver_connection, timezone, thread, driver)
    return driver


def _drop_cursor(connection: Any, driver: Any) -> None:
    """``driver`` closed and no longer kept (after an error: the next call gets a new
    cursor, whatever state the error left this one in)."""
    kept = connection.__dict__.get(_KEPT)
    if kept:
        for kind, entry in list(kept.items()):
            if entry[3] is driver:
                del kept[kind]
    driver.close()


@async_unsafe
def cursor(connection: Any) -> Any:
    """A cursor of ``connection`` for agentstate's fixed statements: prepared on the
    server where the connection allows it.

    Django's psycopg cursors bind parameters on the client, and psycopg prepares
    no such statement. When the site sets ``OPTIONS["prepare_threshold"]``
    (Django leaves it ``None``: never prepare, as a pooler in transaction mode
    needs), this cursor binds on the server instead, and psycopg prepares a
    statement once it ran that many times on the connection: the server then
    parses and plans it once per connection rather than per call. Any other
    connection gets Django's own cursor. Either is Django's cursor wrapper:
    errors, query logging and execute wrappers as usual.
    """
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    if not prepares(connection):
        return connection.cursor()
    with connection.wrap_database_errors:
        return connection._prepare_cursor(_driver_cursor(connection))


def prepares(connection: Any) -> bool:
    """Whether ``connection`` (open) prepares statements: its psycopg connection's
    ``prepare_threshold``, from ``OPTIONS``, is set."""
    return getattr(connection.connection, "prepare_threshold", None) is not None


def _driver_cursor(connection: Any, binding: bool = False) -> Any:
    """The driver's cursor ``cursor`` wraps: Django's own (``create_cursor``), or one
    binding on the server where the connection prepares statements or ``binding``
    asks for one."""
    if not binding and not prepares(connection):
        return connection.create_cursor()
    return _preparing()(connection.connection)


@functools.cache
def _preparing() -> Any:
    """psycopg's server-binding cursor class (PostgreSQL only, so imported when used),
    keeping the statement it ran where Django's query log (``CaptureQueriesContext``,
    DEBUG) reads it: psycopg leaves ``_query`` unset on a prepared statement's run."""
    from django.db.backends.postgresql.base import ServerBindingCursor

    class Preparing(ServerBindingCursor):
        def _convert_query(self, query: Any, params: Any = None) -> Any:
            self._query = super()._convert_query(query, params)  # type: ignore[misc]
            return self._query

    return Preparing


def from_json(model: type[M], row: dict[str, Any], alias: str = "default") -> M:
    """A ``model`` instance from a row as JSON (PostgreSQL's ``to_jsonb(row)``),
    each column through its field's ``to_python`` (but where that gives JSON's
    value back: ``_reading``); keys that are no column become attributes
    (``current_status``, say). Built as ``Columns.builder`` builds an instance
    (``_stored_instance``); the columns a row lacks are deferred."""
    fields = _reading(model)
    if _signalled(model):
        values = {}
        extras = {}
        for key, value in row.items():
            read = fields.get(key)
            if read is None:
                extras[key] = value
            else:
                values[read[0]] = None if value is None else read[2].to_python(value)
        names = [f.attname for f in model._meta.concrete_fields]
        instance = model.from_db(alias, names, [values.get(name, DEFERRED) for name in names])
        instance.__dict__.update(extras)
        return instance
    attributes = {}
    for key, value in row.items():
        read = fields.get(key)
        if read is None:
            attributes[key] = value
        else:
            attname, parse, _ = read
            attributes[attname] = value if value is None or parse is None else parse(value)
    return _stored_instance(model, alias, attributes)


def _signalled(model: type[models.Model]) -> bool:
    """Whether a receiver listens to ``model``'s init signals (then instances are
    built by ``Model.from_db``, which sends them)."""
    return signals.pre_init.has_listeners(model) or signals.post_init.has_listeners(model)


def _stored_instance(model: type[M], alias: str, attributes: Any) -> M:
    """An instance of a stored row on ``alias`` with ``attributes`` (a mapping, or
    pairs), built as ``Model.from_db`` builds it when no init signal is listened
    to: the values straight into the instance, each field's ``__set__`` skipped (a
    new instance has no related object cached for it to clear)."""
    instance = model.__new__(model)
    instance.__dict__.update(attributes)
    state = instance._state = ModelState()
    state.adding, state.db = False, alias
    return instance


# The fields' to_python that give a value as JSON has it back (a string of a
# CharField, a number of an IntegerField, ...): from_json skips them.
_AS_JSON = frozenset(
    {
        models.Field.to_python,
        models.CharField.to_python,
        models.TextField.to_python,
        models.IntegerField.to_python,
        models.BooleanField.to_python,
    }
)


@functools.cache
def _reading(model: type[models.Model]) -> dict[str, tuple[str, Any, models.Field]]:
    """Each concrete field (one with a column) by its column: its attribute's name,
    the ``to_python`` from_json calls (``None``: none needed) and the field."""

    def parse(field: models.Field) -> Any:
        target = field.target_field if isinstance(field, models.ForeignKey) else field
        return None if type(target).to_python in _AS_JSON else field.to_python

    return {
        cast(str, field.column): (field.attname, parse(field), field)
        for field in model._meta.concrete_fields
    }


def where_clause(conditions: Sequence[str]) -> str:
    """A fixed statement's ``WHERE`` clause of ``conditions`` (all of them), with its
    leading space; nothing when there are none."""
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


class Columns:
    """A fixed statement's columns of ``model`` and the instances built from them:
    the concrete fields ``names`` (attribute or field names; ``None``: every one),
    in the model's order, the others deferred (read when used, as ``only()``
    leaves them), built by ``builder``. Cheaper than ``from_json``: no field's
    ``to_python`` but a time's, no dictionary per row."""

    def __init__(self, model: type[models.Model], names: tuple[str, ...] | None = None) -> None:
        fields = [
            field
            for field in model._meta.concrete_fields
            if names is None or field.attname in names or field.name in names
        ]
        self.model = model
        self.names = [field.attname for field in fields]
        self.columns = [cast(str, field.column) for field in fields]
        self.converted = [
            (i, field) for i, field in enumerate(fields) if hasattr(field, "from_db_value")
        ]
        self.parsed = [
            (i, field)
            for i, field in enumerate(fields)
            if isinstance(
                field,
                models.DateField | models.UUIDField | models.DecimalField | models.DurationField,
            )
        ]

    def select(self, table: str, first: int = 0) -> str:
        """The columns as a select list of ``table``'s, named ``c<first>``, ``c<first + 1>``..."""
        return ", ".join(
            f"{table}.{column} AS c{first + i}" for i, column in enumerate(self.columns)
        )

    def builder(self, alias: str, as_json: bool = False) -> Callable[[Any], Any]:
        """What builds an instance on ``alias`` from a row's columns (``as_json``: as
        JSON gave them), decided once for many rows (``_stored_instance``)."""
        model, names = self.model, self.names
        connection = connections[alias]
        converted = self.parsed if as_json else self.converted
        signalled = _signalled(model)

        def build(values: Any) -> Any:
            values = list(values)
            for i, field in converted:
                if values[i] is not None:
                    values[i] = (
                        field.to_python(values[i])
                        if as_json
                        else field.from_db_value(values[i], None, connection)
                    )
            if signalled:
                return model.from_db(alias, names, values)
            return _stored_instance(model, alias, zip(names, values, strict=True))

        return build


# The window count a page's rows carry (``window_page``).
TOTAL = "agentstate_total"


def window_page(queryset: "models.QuerySet[M]", offset: int, limit: int) -> tuple[list[M], int]:
    """``limit`` rows of ``queryset`` from ``offset``, and how many rows it has in all,
    in one query: each row carries ``COUNT(*) OVER ()``. An empty page counts 0."""
    rows = list(queryset.annotate(**{TOTAL: Window(Count("*"))})[offset : offset + limit])
    return rows, getattr(rows[0], TOTAL) if rows else 0


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


def database_now(alias: str = DEFAULT_DB_ALIAS) -> datetime:
    """The database's clock, now (``Now()`` as the database computes it), for a time
    that is compared with the times the database writes: nodes whose clocks drift
    apart agree on it."""
    connection = connections[alias]
    query = Query(None)
    now = Now().resolve_expression(query)
    sql, params = query.get_compiler(alias).compile(now)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql}", params)
        (value,) = cursor.fetchone()
    for convert in connection.ops.get_db_converters(now) + now.get_db_converters(connection):
        value = convert(value, now, connection)
    return cast(datetime, value)


def database_epoch(alias: str = DEFAULT_DB_ALIAS) -> float:
    """``database_now`` in epoch seconds (a naive time, without ``USE_TZ``, read in the
    default time zone, as Django reads the database's times then)."""
    now = database_now(alias)
    if timezone.is_naive(now):
        now = timezone.make_aware(now, timezone.get_default_timezone())
    return now.timestamp()
