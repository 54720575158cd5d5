"""How the migrations install the PL/pgSQL functions: ``RunSQLFile``.

Two places hold the functions' SQL, each for its own reader:

- ``CURRENT`` (``agentstate/backends/postgresql/sql/``): the functions as they
  are now, one file per part, the SQL to read and change;
- ``FROZEN`` (``agentstate/migrations/sql/``): what each migration installs,
  a file of its own per migration, never changed once released, so that
  replaying the migrations replays history. A change of a function in
  ``CURRENT`` is a new migration whose file creates it again
  (``tests/backends/test_migrations.py`` checks that the migrations' files, read in
  order, define every function as ``CURRENT`` does).
"""

from pathlib import Path
from typing import Any

from django.db import migrations

CURRENT = Path(__file__).with_name("sql")
FROZEN = Path(__file__).parents[2] / "migrations" / "sql"


class RunSQLFile(migrations.RunSQL):
    """Run a file of ``FROZEN`` forwards and another backwards, on PostgreSQL only
    (nothing on other databases). Each file goes to the database whole, in one
    statement batch, its dollar-quoted bodies untouched."""

    def __init__(self, forward: str, reverse: str) -> None:
        self.forward, self.reverse = forward, reverse
        super().__init__(
            [(FROZEN / forward).read_text()], [(FROZEN / reverse).read_text()], elidable=False
        )

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return self.__class__.__qualname__, [self.forward, self.reverse], {}

    def describe(self) -> str:
        return f"Run {self.forward} on PostgreSQL"

    def database_forwards(self, app_label: str, schema_editor: Any, *states: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, *states)

    def database_backwards(self, app_label: str, schema_editor: Any, *states: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, *states)
