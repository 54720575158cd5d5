"""The PostgreSQL backend: every operation one round trip.

Each operation is one call of a PL/pgSQL function (``sql/*.sql``, installed
by the migrations through ``install``) that does the whole operation, its
audit events included, and answers in JSON. A refusal raises SQLSTATE
``AS001`` (``agentstate_refuse``), naming the exception class of
``agentstate.exceptions`` and the facts of the case, which undoes what the
call wrote. No transaction is opened around it: in autocommit the call is
its own transaction. No session state outlives a call, so it runs unchanged
behind PgBouncer in transaction pooling mode.

The functions' SQL lives in ``sql/``, one file per part, read in name order.
Changing a file takes a new migration that runs ``install`` again (it drops
every ``agentstate_*`` function first, so signatures may change).
"""

import json
from pathlib import Path
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.db import DatabaseError
from django.db.models import Field

from agentstate.backends.base import Backend
from agentstate.db import call, call_row
from agentstate.exceptions import refusal

from .auth import AuthOperations
from .budgets import BudgetOperations
from .checkpoints import CheckpointOperations
from .context import ContextOperations
from .pauses import PauseOperations
from .policies import PolicyOperations
from .runs import RunOperations
from .store import StoreOperations
from .sweep import SweepOperations

SQL_DIR = Path(__file__).with_name("sql")
PREFIX = "agentstate_"
REFUSED = "AS001"


def install(schema_editor: Any) -> None:
    """Install the current functions (a ``RunPython`` step; nothing off PostgreSQL)."""
    if schema_editor.connection.vendor != "postgresql":
        return
    uninstall(schema_editor)
    # A SQL function's body may name tables that a later migration makes.
    schema_editor.execute("SET LOCAL check_function_bodies = off", params=None)
    for function in _user_functions(schema_editor.quote_name):
        schema_editor.execute(function, params=None)
    for path in sorted(SQL_DIR.glob("*.sql")):
        schema_editor.execute(path.read_text(), params=None)


def _user_functions(quote: Any) -> list[str]:
    """``agentstate_user_id(username)``: the site's user model's id for a username, or
    NULL; ``agentstate_username(id)``: the other way round (the functions whose SQL
    depends on the site: ``AUTH_USER_MODEL``)."""
    meta = get_user_model()._meta
    username = quote(cast(Field, meta.get_field(get_user_model().USERNAME_FIELD)).column)
    pk, table = quote(meta.pk.column), quote(meta.db_table)
    return [
        "CREATE FUNCTION agentstate_user_id(p_username text) RETURNS bigint"
        f" LANGUAGE sql STABLE AS $$ SELECT {pk} FROM {table} WHERE {username} = p_username $$",
        "CREATE FUNCTION agentstate_username(p_id bigint) RETURNS text"
        f" LANGUAGE sql STABLE AS $$ SELECT {username}::text FROM {table} WHERE {pk} = p_id $$",
    ]


def uninstall(schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "DO $$ DECLARE f regprocedure; BEGIN"
        " FOR f IN SELECT p.oid::regprocedure FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace"
        f" WHERE n.nspname = current_schema() AND p.proname LIKE '{PREFIX}%'"
        " LOOP EXECUTE 'DROP FUNCTION ' || f || ' CASCADE'; END LOOP; END $$",
        params=None,
    )


class PostgreSQLBackend(
    AuthOperations,
    ContextOperations,
    PauseOperations,
    PolicyOperations,
    RunOperations,
    BudgetOperations,
    CheckpointOperations,
    StoreOperations,
    SweepOperations,
    Backend,
):
    """Every operation of ``Backend`` as one call of its function."""

    def call(self, function: str, *args: Any) -> dict[str, Any]:
        """The function's result; its refusal raised as the exception it names."""
        try:
            result: dict[str, Any] = call(self.alias, PREFIX + function, *args)
            return result
        except DatabaseError as error:
            diagnostic = getattr(error.__cause__, "diag", None)
            if diagnostic is None or getattr(error.__cause__, "sqlstate", None) != REFUSED:
                raise
            raise refusal(
                diagnostic.message_primary, json.loads(diagnostic.message_detail)
            ) from None

    def call_row(self, function: str, *args: Any) -> tuple[Any, ...] | None:
        """The first row a set-returning function answers (``None``: none)."""
        return call_row(self.alias, PREFIX + function, *args)
