"""Columns whose values compare exactly on every database, and the indexes over them.

Keys, names, run ids and scopes are compared byte for byte: ``A`` and ``a``,
``café`` and ``cafe``, ``x`` and ``x `` (a trailing space) are different
values. PostgreSQL and SQLite compare so by default. A MySQL or MariaDB
database created with the server's defaults compares text case- and
accent-insensitively, and PAD SPACE collations (MariaDB's ``utf8mb4_bin``
included) ignore trailing spaces; so these columns carry a binary NO PAD
collation there: MariaDB's ``utf8mb4_nopad_bin``, MySQL's
``utf8mb4_0900_bin``. Elsewhere their DDL is exactly that of Django's own
``CharField`` and ``TextField``.

MySQL and MariaDB index no TEXT column whole (an index key holds at most 3072
bytes). ``TextPrefixIndex`` indexes a TEXT column by its first characters
there (a lookup still compares the whole value; the index only finds the
rows), and ``TextUniqueConstraint`` keeps uniqueness over the whole value:
MariaDB's own long unique keys (a hash of the value, compared in full), a
functional key part over the value's SHA-256 on MySQL. No limit is lowered
on any database.
"""

from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

# How many characters of a TEXT column a MySQL index holds: 191 x 4 bytes fits
# InnoDB's 767-byte limit of its oldest row formats.
TEXT_PREFIX = 191


def exact_collation(connection: BaseDatabaseWrapper) -> str | None:
    """The binary NO PAD collation of MySQL or MariaDB; ``None`` elsewhere (their
    default compares exactly)."""
    if connection.vendor != "mysql":
        return None
    return "utf8mb4_nopad_bin" if connection.mysql_is_mariadb else "utf8mb4_0900_bin"  # type: ignore[attr-defined]


class ExactCollation:
    """A text field's column with the exact collation of the database, if any."""

    def db_parameters(self, connection: BaseDatabaseWrapper) -> dict[str, Any]:
        params: dict[str, Any] = super().db_parameters(connection)  # type: ignore[misc]
        if params.get("collation") is None:
            params["collation"] = exact_collation(connection)
        return params


class ExactCharField(ExactCollation, models.CharField):
    """A ``CharField`` compared byte for byte on every database."""


class ExactTextField(ExactCollation, models.TextField):
    """A ``TextField`` compared byte for byte on every database."""


class AnyDepthJSONField(models.JSONField):
    """A ``JSONField`` that holds JSON of any depth on every database.

    MariaDB's JSON type checks each value with ``JSON_VALID``, which refuses
    nesting deeper than 32, below the depth the app accepts
    (``MAX_JSON_DEPTH``, 64 by default); there this column is the text that
    type stands for, without the check (every value is JSON the app made).
    Elsewhere it is Django's own."""

    def db_type(self, connection: BaseDatabaseWrapper) -> str | None:
        if _mariadb(connection):
            # what MariaDB's own JSON type is, without the check it adds
            return "longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
        return super().db_type(connection)

    def db_check(self, connection: BaseDatabaseWrapper) -> str | None:
        return None if _mariadb(connection) else super().db_check(connection)


def _mariadb(connection: BaseDatabaseWrapper) -> bool:
    return connection.vendor == "mysql" and bool(connection.mysql_is_mariadb)  # type: ignore[attr-defined]


def _is_text(model: Any, name: str) -> bool:
    return isinstance(model._meta.get_field(name), models.TextField)


def _mysql(schema_editor: Any) -> bool:
    return bool(schema_editor.connection.vendor == "mysql")


class TextPrefixIndex(models.Index):
    """An ``Index`` whose TEXT columns MySQL and MariaDB index by their first
    ``TEXT_PREFIX`` characters; the same index as Django's elsewhere."""

    def create_sql(
        self,
        model: Any,
        schema_editor: Any,
        using: str = "",
        **kwargs: Any,
    ) -> Any:
        statement = super().create_sql(model, schema_editor, using, **kwargs)
        if _mysql(schema_editor) and not self.expressions:
            columns: Any = statement.parts["columns"]
            suffixes = list(columns.col_suffixes or [""] * len(self.fields_orders))
            columns.col_suffixes = [
                f"({TEXT_PREFIX}){suffix}" if _is_text(model, name) else suffix
                for (name, _), suffix in zip(self.fields_orders, suffixes, strict=True)
            ]
        return statement


class TextUniqueConstraint(models.UniqueConstraint):
    """A ``UniqueConstraint`` over whole TEXT values: on MySQL (not MariaDB, whose
    long unique keys do it themselves) a unique index with the SHA-256 of each
    TEXT column as a functional key part; Django's own constraint elsewhere."""

    def _hashed(self, model: Any, schema_editor: Any) -> bool:
        connection = schema_editor.connection
        return (
            _mysql(schema_editor)
            and not connection.mysql_is_mariadb
            and any(_is_text(model, name) for name in self.fields)
        )

    def _hashed_sql(self, model: Any, schema_editor: Any) -> str:
        quote = schema_editor.quote_name
        parts = []
        for name in self.fields:
            column = quote(model._meta.get_field(name).column)
            parts.append(f"(SHA2({column}, 256))" if _is_text(model, name) else column)
        return (
            f"CREATE UNIQUE INDEX {quote(self.name)} ON {quote(model._meta.db_table)}"
            f" ({', '.join(parts)})"
        )

    def constraint_sql(self, model: Any, schema_editor: Any) -> Any:
        if self._hashed(model, schema_editor):
            schema_editor.deferred_sql.append(self._hashed_sql(model, schema_editor))
            return None
        return super().constraint_sql(model, schema_editor)

    def create_sql(self, model: Any, schema_editor: Any) -> Any:
        if self._hashed(model, schema_editor):
            return self._hashed_sql(model, schema_editor)
        return super().create_sql(model, schema_editor)
