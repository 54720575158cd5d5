"""System checks for the misconfigurations a site can make."""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register

from agentstate.conf import agentstate_settings


@register(Tags.database, Tags.compatibility)
def check_sqlite_transaction_mode(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """SQLite must begin write transactions IMMEDIATE (or EXCLUSIVE).

    With SQLite's default DEFERRED mode two transactions that read then write
    deadlock on upgrade and one gets "database is locked" at once, whatever
    the busy timeout: atomic push, pop and claim cannot hold.
    """
    errors: list[CheckMessage] = []
    for alias, db in settings.DATABASES.items():
        if db.get("ENGINE") != "django.db.backends.sqlite3":
            continue
        mode = str(db.get("OPTIONS", {}).get("transaction_mode", "")).upper()
        if mode not in {"IMMEDIATE", "EXCLUSIVE"}:
            errors.append(
                Error(
                    f"SQLite database {alias!r} does not set OPTIONS['transaction_mode'] "
                    "to 'IMMEDIATE'.",
                    hint="Add 'OPTIONS': {'transaction_mode': 'IMMEDIATE', 'timeout': 20} "
                    "so that concurrent writers wait instead of failing.",
                    id="agentstate.E001",
                )
            )
    return errors


@register(Tags.compatibility)
def check_settings(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    return [
        Error(f"AGENTSTATE: {problem}.", id="agentstate.E002")
        for problem in agentstate_settings.validate()
    ]
