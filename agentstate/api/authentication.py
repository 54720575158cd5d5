"""DRF's token authentication, with the user's permissions read in the same statement.

A drop-in for ``rest_framework.authentication.TokenAuthentication`` with the
same rules and answers (an unknown token or an inactive user: 401). On
PostgreSQL one fixed statement reads the token, its user and the user's
permissions (its own and its groups'), which are handed to Django's
``ModelBackend`` as the permission cache it keeps on a user object: every
``has_perm`` check of the request then costs no query, and a request costs
the token lookup and the operation's own round trip. Nothing outlives the
request: a deleted token, a deactivated user or a permission granted or
taken away holds from the very next request. Other databases get DRF's own
lookup (and permissions read when first checked).
"""

import functools
import json
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from agentstate.db import from_json


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        if connection.vendor != "postgresql":
            return super().authenticate_credentials(key)
        with connection.cursor() as cursor:
            cursor.execute(_statement(self.get_model()), [key])
            row = cursor.fetchone()
        if row is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user_row, created, own, grouped = row
        user = from_json(get_user_model(), _decoded(user_row), connection.alias)
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        if own is not None:
            # ModelBackend's per-object permission cache, filled as it would fill it.
            user._user_perm_cache = set(own)
            user._group_perm_cache = set(grouped)
            user._perm_cache = user._user_perm_cache | user._group_perm_cache
        return user, self.get_model()(key=key, user=user, created=created)


def _decoded(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str | bytes) else value


@functools.cache
def _statement(token_model: type) -> str:
    """The token's user as JSON, the token's creation time, and the user's own and its
    groups' permissions as ``app_label.codename`` (NULL for a user model without
    Django's permissions)."""
    user_model = get_user_model()
    token = token_model._meta
    user = user_model._meta
    perms = "NULL, NULL"
    if any(f.name == "user_permissions" for f in user.get_fields()):
        own = user.get_field("user_permissions").remote_field.through._meta
        groups = user.get_field("groups")
        member = groups.remote_field.through._meta
        granted = groups.related_model._meta.get_field("permissions").remote_field.through._meta
        names = (
            f"SELECT ct.app_label || '.' || p.codename FROM {Permission._meta.db_table} p"
            f" JOIN {ContentType._meta.db_table} ct ON ct.id = p.content_type_id WHERE p.id IN"
        )
        perms = (
            f"ARRAY({names} (SELECT {own.get_field('permission').column} FROM {own.db_table} WHERE"
            f" {own.get_field(user.model_name).column} = u.{user.pk.column})),"
            f" ARRAY({names} (SELECT g.{granted.get_field('permission').column}"
            f" FROM {granted.db_table} g JOIN {member.db_table} m"
            f" ON m.{member.get_field('group').column} = g.{granted.get_field('group').column} WHERE"
            f" m.{member.get_field(user.model_name).column} = u.{user.pk.column}))"
        )
    return (
        f"SELECT to_jsonb(u), t.{token.get_field('created').column}, {perms}"
        f" FROM {token.db_table} t JOIN {user.db_table} u"
        f" ON u.{user.pk.column} = t.{token.get_field('user').column}"
        f" WHERE t.{token.get_field('key').column} = %s"
    )
