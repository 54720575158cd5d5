"""How the migrations install the PL/pgSQL functions (``RunSQLFile``), and
change the indexes of large tables without stopping their writes
(``AddIndexConcurrently``, ``RemoveIndexConcurrently``).

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

from django.db import NotSupportedError, migrations

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


def _concurrently(schema_editor: Any) -> bool:
    """Whether an index is to be built or dropped concurrently: on PostgreSQL, which
    does so only outside a transaction (the migration's ``atomic = False``)."""
    if schema_editor.connection.vendor != "postgresql":
        return False
    if schema_editor.connection.in_atomic_block:
        raise NotSupportedError(
            "An index is built or dropped concurrently outside a transaction: "
            "set atomic = False on the migration."
        )
    return True


def _change(
    operation: Any, app_label: str, schema_editor: Any, state: Any, index: Any, add: bool
) -> None:
    """``index`` of ``operation``'s model (as in ``state``) built (``add``) or dropped
    concurrently, where the operation migrates that model."""
    model = state.apps.get_model(app_label, operation.model_name)
    if operation.allow_migrate_model(schema_editor.connection.alias, model):
        change = schema_editor.add_index if add else schema_editor.remove_index
        change(model, index, concurrently=True)


class AddIndexConcurrently(migrations.AddIndex):
    """Django's ``AddIndex``; on PostgreSQL ``CREATE INDEX CONCURRENTLY``: the
    table's writes go on while the index is built (a plain ``CREATE INDEX`` makes
    every insert, update and delete wait for it). Elsewhere as ``AddIndex``: MySQL
    and MariaDB build an index online anyway."""

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if not _concurrently(schema_editor):
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        _change(self, app_label, schema_editor, to_state, self.index, add=True)

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if not _concurrently(schema_editor):
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        _change(self, app_label, schema_editor, from_state, self.index, add=False)


class RemoveIndexConcurrently(migrations.RemoveIndex):
    """Django's ``RemoveIndex``; on PostgreSQL ``DROP INDEX CONCURRENTLY``, which
    waits for the table's transactions rather than making them wait."""

    def _index(self, app_label: str, state: Any) -> Any:
        return state.models[app_label, self.model_name_lower].get_index_by_name(self.name)

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if not _concurrently(schema_editor):
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        index = self._index(app_label, from_state)
        _change(self, app_label, schema_editor, from_state, index, add=False)

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if not _concurrently(schema_editor):
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        index = self._index(app_label, to_state)
        _change(self, app_label, schema_editor, to_state, index, add=True)
