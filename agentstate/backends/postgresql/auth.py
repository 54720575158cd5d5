"""The REST API's tokens on PostgreSQL: one fixed statement reads the token, its user
and the user's permissions (its own and its groups'), which are handed to Django's
``ModelBackend`` as the permission cache it keeps on a user object: every
``has_perm`` check of the request then costs no query.

A connection that prepares statements (``OPTIONS["prepare_threshold"]``, see
``db.cursor``) prepares it and keeps its plan. On one that does not (Django's
default, and behind a pooler in transaction mode), the server planned its
seven tables anew on every request: about 0.6 ms of its CPU where running it
takes about 0.1 ms. There, for Django's user model and DRF's token model
(``STANDARD``), ``agentstate_token`` (``sql/60_auth.sql``) runs it, and PL/pgSQL
keeps its plan for the session.
"""

import functools
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connections
from django.db.models import Field, ManyToManyField, Model
from django.db.models.options import Options

from agentstate.db import cursor, decoded, from_json, prepares


class AuthOperations:
    alias: str

    def token(self, token_model: type[Model], key: str) -> Any:
        connection = connections[self.alias]
        with cursor(connection) as c:
            # A prepared statement keeps its plan (``db.cursor``); else the function's.
            statement = _statement(token_model) if prepares(connection) else _lookup(token_model)
            c.execute(statement, [key])
            row = c.fetchone()
        if row is None:
            return None
        user_row, created, own, grouped = row
        user = from_json(get_user_model(), decoded(user_row), self.alias)
        if own is not None:
            # ModelBackend's per-object permission cache, filled as it would fill it
            # (private attributes, which django-stubs leaves out).
            own_perms, group_perms = set(own), set(grouped)
            user._user_perm_cache = own_perms  # type: ignore[attr-defined]
            user._group_perm_cache = group_perms  # type: ignore[attr-defined]
            user._perm_cache = own_perms | group_perms  # type: ignore[attr-defined]
        return token_model(key=key, user=user, created=created)


def _column(meta: "Options[Any]", name: str) -> str | None:
    """The column of the field ``name`` (a concrete one) of ``meta``'s model."""
    return cast(Field, meta.get_field(name)).column


def _through(meta: "Options[Any]", name: str) -> "Options[Any]":
    """The ``_meta`` of the through model of the many-to-many field ``name`` of
    ``meta``'s model (set once the models are loaded)."""
    field = cast(ManyToManyField, meta.get_field(name))
    return cast(type[Model], field.remote_field.through)._meta


# ``_statement`` for Django's user model and DRF's token model, which
# ``agentstate_token`` runs (``sql/60_auth.sql``).
STANDARD = (
    "SELECT to_jsonb(u), t.created,"
    " ARRAY(SELECT ct.app_label || '.' || p.codename FROM auth_permission p"
    " JOIN django_content_type ct ON ct.id = p.content_type_id"
    " WHERE p.id IN (SELECT permission_id FROM auth_user_user_permissions"
    " WHERE user_id = u.id)),"
    " ARRAY(SELECT ct.app_label || '.' || p.codename FROM auth_permission p"
    " JOIN django_content_type ct ON ct.id = p.content_type_id"
    " WHERE p.id IN (SELECT g.permission_id FROM auth_group_permissions g"
    " JOIN auth_user_groups m ON m.group_id = g.group_id"
    " WHERE m.user_id = u.id))"
    " FROM authtoken_token t JOIN auth_user u ON u.id = t.user_id WHERE t.key = %s"
)


@functools.cache
def _lookup(token_model: type[Model]) -> str:
    """What reads a token of ``token_model``: ``agentstate_token`` when the models'
    statement is the one it runs (``STANDARD``), else the statement itself."""
    statement = _statement(token_model)
    return "SELECT * FROM agentstate_token(%s)" if statement == STANDARD else statement


@functools.cache
def _statement(token_model: type[Model]) -> str:
    """The token's user as JSON, the token's creation time, and the user's own and its
    groups' permissions as ``app_label.codename`` (NULL for a user model without
    Django's permissions)."""
    user_model = get_user_model()
    token = token_model._meta
    user = user_model._meta
    perms = "NULL, NULL"
    if any(f.name == "user_permissions" for f in user.get_fields()):
        own = _through(user, "user_permissions")
        member = _through(user, "groups")
        granted = _through(user.get_field("groups").related_model._meta, "permissions")
        user_key = cast(str, user.model_name)  # the through models' key to the user
        names = (
            f"SELECT ct.app_label || '.' || p.codename FROM {Permission._meta.db_table} p"
            f" JOIN {ContentType._meta.db_table} ct ON ct.id = p.content_type_id WHERE p.id IN"
        )
        perms = (
            f"ARRAY({names} (SELECT {_column(own, 'permission')} FROM {own.db_table} WHERE"
            f" {_column(own, user_key)} = u.{user.pk.column})),"
            f" ARRAY({names} (SELECT g.{_column(granted, 'permission')}"
            f" FROM {granted.db_table} g JOIN {member.db_table} m"
            f" ON m.{_column(member, 'group')} = g.{_column(granted, 'group')} WHERE"
            f" m.{_column(member, user_key)} = u.{user.pk.column}))"
        )
    return (
        f"SELECT to_jsonb(u), t.{_column(token, 'created')}, {perms}"
        f" FROM {token.db_table} t JOIN {user.db_table} u"
        f" ON u.{user.pk.column} = t.{_column(token, 'user')}"
        f" WHERE t.{_column(token, 'key')} = %s"
    )
