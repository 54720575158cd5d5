"""Who may reach what over REST.

A user reaches the objects they created (and, for pauses, those they own).
A user holding a model's Django permission reaches every object of that
model, and may name another owner with ``owner``. Another user's object
answers 404, exactly like a missing one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.contrib.auth import get_user_model
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request

from agentstate.exceptions import BadInput

if TYPE_CHECKING:
    # What ``request.user`` is: the site's user model (AUTH_USER_MODEL, as
    # django-stubs resolves ``_User``) or ``AnonymousUser``.
    from django.contrib.auth.models import _AnyUser, _User

__all__ = ["IsAuthenticated", "acting_owner", "has_model_perm", "named_owner"]


def has_model_perm(user: _AnyUser, codename: str) -> bool:
    """``codename`` like ``"view_scope"``: the user's ``agentstate.<codename>``."""
    return user.has_perm(f"agentstate.{codename}")


def named_owner(request: Request, username: str | None, codename: str) -> _User:
    """``acting_owner``, the named owner looked up here (a listing filters by it)."""
    owner = acting_owner(request, username, codename)
    if not isinstance(owner, str):
        return owner
    User = get_user_model()
    try:
        return User._default_manager.get_by_natural_key(owner)
    except User.DoesNotExist:
        raise BadInput(f"No user named {username!r}.", field="owner") from None


def acting_owner(request: Request, username: str | None, codename: str) -> _User | str:
    """The owner a request acts for: itself, or ``username`` (as given: the operation
    looks it up, and an unknown one is bad input) with ``codename``. Naming another
    owner without the permission is 403 whether or not that owner exists."""
    user = request.user
    if username is None or username == user.get_username():
        # Every agentstate view takes IsAuthenticated: never AnonymousUser here.
        return cast("_User", user)
    if not has_model_perm(user, codename):
        raise PermissionDenied(f"You may not act for another owner without agentstate.{codename}.")
    return username
