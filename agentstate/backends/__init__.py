"""The storage backend of each database: ``backend(using)``.

PostgreSQL gets ``PostgreSQLBackend`` (one round trip per operation); every
other database Django supports, SQLite included, the portable
``ORMBackend``. ``AGENTSTATE["BACKEND"]`` (a dotted path) names another
class for every database.
"""

import functools

from django.db import DEFAULT_DB_ALIAS, connections
from django.utils.module_loading import import_string

from agentstate.conf import agentstate_settings

from .base import Backend, BudgetState, Changed, EventFilters, Page, PauseFilters, RequestFilters

__all__ = [
    "Backend",
    "BudgetState",
    "Changed",
    "EventFilters",
    "Page",
    "PauseFilters",
    "RequestFilters",
    "backend",
]

BY_VENDOR = {"postgresql": "agentstate.backends.postgresql.PostgreSQLBackend"}
PORTABLE = "agentstate.backends.orm.ORMBackend"


def backend(using: str | None = None) -> Backend:
    """The backend of the database ``using`` (default: Django's default database)."""
    alias = using or DEFAULT_DB_ALIAS
    path = agentstate_settings.BACKEND or BY_VENDOR.get(connections[alias].vendor, PORTABLE)
    return _instance(path, alias)


@functools.cache
def _instance(path: str, alias: str) -> Backend:
    backend_class: type[Backend] = import_string(path)
    return backend_class(alias)
