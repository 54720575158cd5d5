"""DRF's token authentication, its token and user read by one fixed statement.

A drop-in for ``rest_framework.authentication.TokenAuthentication`` with the
same rules and answers (an unknown token or an inactive user: 401). DRF's own
builds an ORM query (``select_related("user").get(key=...)``) on every
request, which costs more than the query itself; this one sends fixed SQL.
Nothing is cached: a deleted token or a deactivated user is refused on the
very next request.
"""

from django.contrib.auth import get_user_model
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from agentstate.db import returned


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate_credentials(self, key: str):
        token_model, user_model = self.get_model(), get_user_model()
        token_field = token_model._meta.get_field
        users = returned(
            user_model,
            f"SELECT u.*, t.{token_field('created').column} AS agentstate_token_created"
            f" FROM {token_model._meta.db_table} t JOIN {user_model._meta.db_table} u"
            f" ON u.{user_model._meta.pk.column} = t.{token_field('user').column}"
            f" WHERE t.{token_field('key').column} = %s",
            [key],
            extra=token_field("created"),
        )
        if not users:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user = users[0]
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        created = user.__dict__.pop("agentstate_token_created")
        return user, token_model(key=key, user=user, created=created)
