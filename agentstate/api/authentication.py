"""DRF's token authentication, with the user's permissions read in the same statement.

A drop-in for ``rest_framework.authentication.TokenAuthentication`` with the
same rules and answers (an unknown token or an inactive user: 401). The
backend reads the token with its user (``Backend.token``): on PostgreSQL one
fixed statement reads the token, its user and the user's permissions (its own
and its groups'), which are handed to Django's ``ModelBackend`` as the
permission cache it keeps on a user object: every ``has_perm`` check of the
request then costs no query, and a request costs the token lookup and the
operation's own round trip. Nothing outlives the request: a deleted token, a
deactivated user or a permission granted or taken away holds from the very
next request. Other databases get DRF's own lookup (and permissions read when
first checked).
"""

from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from agentstate.backends import backend


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        token = backend().token(self.get_model(), key)
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return token.user, token
