"""The PostgreSQL backend: every operation one round trip (but the approval rules'
changes: ``oversight``).

Each operation is one call of a PL/pgSQL function (``sql/*.sql``, installed
by the migrations: ``schema``) that does the whole operation, its audit
events included, and answers in JSON. Every argument goes by its parameter's
name (``agentstate_claim(p_chat => ..., ...)``). A refusal raises SQLSTATE
``AS001`` (``agentstate_refuse``), naming the exception class of
``agentstate.exceptions`` and the facts of the case, which undoes what the
call wrote. No transaction is opened around it: in autocommit the call is
its own transaction. No session state outlives a call, so it runs unchanged
behind PgBouncer in transaction pooling mode.

The functions' SQL lives in ``sql/``, one file per part; changing a function
there takes a new migration with its own SQL file (``schema``).
"""

import json
from typing import Any

from django.db import DatabaseError

from agentstate.backends.base import Backend
from agentstate.db import call, call_row, call_rows
from agentstate.exceptions import refusal

from .auth import AuthOperations
from .budgets import BudgetOperations
from .checkpoints import CheckpointOperations
from .context import ContextOperations
from .oversight import OversightOperations
from .pauses import PauseOperations
from .policies import PolicyOperations
from .runs import RunOperations
from .store import StoreOperations
from .sweep import SweepOperations
from .trail import TrailOperations

PREFIX = "agentstate_"
REFUSED = "AS001"


class PostgreSQLBackend(
    AuthOperations,
    ContextOperations,
    PauseOperations,
    PolicyOperations,
    RunOperations,
    OversightOperations,
    BudgetOperations,
    CheckpointOperations,
    StoreOperations,
    SweepOperations,
    TrailOperations,
    Backend,
):
    """Every operation of ``Backend`` as one call of its function."""

    def call(self, function: str, **params: Any) -> dict[str, Any]:
        """The function's result; its refusal raised as the exception it names."""
        try:
            result: dict[str, Any] = call(self.alias, PREFIX + function, **params)
            return result
        except DatabaseError as error:
            diagnostic = getattr(error.__cause__, "diag", None)
            if diagnostic is None or getattr(error.__cause__, "sqlstate", None) != REFUSED:
                raise
            raise refusal(
                diagnostic.message_primary, json.loads(diagnostic.message_detail)
            ) from None

    def call_row(self, function: str, **params: Any) -> tuple[Any, ...] | None:
        """The first row a set-returning function answers (``None``: none)."""
        return call_row(self.alias, PREFIX + function, **params)

    def call_rows(self, function: str, **params: Any) -> list[tuple[Any, ...]]:
        """Every row a set-returning function answers."""
        return call_rows(self.alias, PREFIX + function, **params)
