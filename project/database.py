"""The database of ``DATABASE_URL``, as the demo site and the test suite set it up.

``postgres://user@host:port/db`` (psycopg) or ``mysql://user@host:port/db``
(mysqlclient, for MySQL and MariaDB). On MySQL and MariaDB each connection
speaks ``utf8mb4`` (every character, emoji included) in READ COMMITTED, the
isolation level Django recommends for ``select_for_update``: a locking read
then sees the row as the transaction that held the lock committed it, and
InnoDB takes no gap locks, which REPEATABLE READ's inserts deadlock on.
"""

import os
from typing import Any
from urllib.parse import quote

import dj_database_url

MYSQL_OPTIONS = {"charset": "utf8mb4", "isolation_level": "read committed"}


def transaction_pooled() -> bool:
    """Whether the database is reached through a pooler in transaction mode
    (``DATABASE_POOLING=transaction``: PgBouncer's, say)."""
    return os.environ.get("DATABASE_POOLING") == "transaction"


def from_url(url: str, **kwargs: Any) -> dict[str, Any]:
    """Django's settings of the database at ``url`` (``kwargs`` go to
    ``dj_database_url.parse``: ``conn_max_age``, say)."""
    config: dict[str, Any] = dict(dj_database_url.parse(url, **kwargs))
    if config["ENGINE"] == "django.db.backends.mysql":
        config["OPTIONS"] = {**MYSQL_OPTIONS, **config.get("OPTIONS", {})}
    # Behind PgBouncer in transaction pooling mode, a server-side cursor (what
    # QuerySet.iterator() opens) would outlive the transaction that made it.
    pooled = transaction_pooled()
    if pooled:
        config["DISABLE_SERVER_SIDE_CURSORS"] = True
    # Server-side prepared statements for agentstate's operations on PostgreSQL:
    # psycopg prepares one after it ran this many times on a connection. Off behind
    # a pooler in transaction mode, unless it keeps them (PgBouncer 1.21+ with
    # max_prepared_statements): set DATABASE_PREPARE_THRESHOLD there ("" turns
    # them off).
    threshold = os.environ.get("DATABASE_PREPARE_THRESHOLD", "" if pooled else "5")
    if threshold and config["ENGINE"].endswith("postgresql"):
        config.setdefault("OPTIONS", {})["prepare_threshold"] = int(threshold)
    return config


def url_of(config: dict[str, Any]) -> str:
    """The ``DATABASE_URL`` of a PostgreSQL or MySQL/MariaDB database's settings
    (what a subprocess of the tests is given to use the same database)."""
    scheme = "mysql" if config["ENGINE"] == "django.db.backends.mysql" else "postgres"
    user = quote(config.get("USER") or ("root" if scheme == "mysql" else "postgres"), safe="")
    password = f":{quote(config['PASSWORD'], safe='')}" if config.get("PASSWORD") else ""
    host = config.get("HOST") or "127.0.0.1"
    port = config.get("PORT") or (3306 if scheme == "mysql" else 5432)
    return f"{scheme}://{user}{password}@{host}:{port}/{quote(config['NAME'], safe='')}"
