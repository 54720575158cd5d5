"""Who may see and change what over REST: every access rule of the API, in one place.

A user reaches the objects they created (and, for pauses and events, those
they own). A user holding a model's Django permission reaches every object of
that model, and may name another owner with ``owner``. Another user's object
answers 404, exactly like a missing one: the listings filter by what the
caller may see (the QuerySet methods of ``agentstate.models.querysets``, or
a ``Reach`` the listing's operation takes into its own statement), and the
operations on one object take the caller's ``Reach`` into their own
statement. A permission an endpoint takes is checked first (403).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, cast

from django.apps import apps
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request

from agentstate.exceptions import BadInput
from agentstate.models import ApprovalRequest, Event
from agentstate.models.querysets import EventQuerySet
from agentstate.types import Reach

if TYPE_CHECKING:
    # What ``request.user`` is: the site's user model (AUTH_USER_MODEL, as
    # django-stubs resolves ``_User``) or ``AnonymousUser``.
    from django.contrib.auth.models import _AnyUser, _User

__all__ = [
    "IsAuthenticated",
    "acting_owner",
    "acting_username",
    "events_reach",
    "has_any_perm",
    "has_model_perm",
    "named_owner",
    "object_types",
    "reach",
    "require",
    "visible_events",
    "visible_pauses",
    "visible_requests",
]


def has_model_perm(user: _AnyUser, codename: str) -> bool:
    """``codename`` like ``"view_scope"``: the user's ``agentstate.<codename>``."""
    return user.has_perm(f"agentstate.{codename}")


def has_any_perm(user: _AnyUser, *codenames: str) -> bool:
    return any(has_model_perm(user, codename) for codename in codenames)


def require(user: _AnyUser, codename: str, refusal: str) -> None:
    """403 with ``refusal`` unless ``user`` holds ``agentstate.<codename>``."""
    if not has_model_perm(user, codename):
        raise PermissionDenied(refusal)


# The owner a request acts for


def acting_owner(request: Request, username: str | None, codename: str) -> _User | str:
    """The owner a request acts for: the caller itself (as a user), or ``username``
    (as given: the operation looks it up when it needs a user, and an owner of a
    pause is a principal id, not necessarily a user of this site) with
    ``codename``. Naming another owner without the permission is 403 whether or
    not that owner exists."""
    user = request.user
    if username is None or username == user.get_username():
        # Every agentstate view takes IsAuthenticated: never AnonymousUser here.
        return cast("_User", user)
    require(user, codename, f"You may not act for another owner without agentstate.{codename}.")
    return username


def acting_username(request: Request, username: str | None, codename: str) -> str:
    """``acting_owner`` by name: a pause's owner is a username."""
    owner = acting_owner(request, username, codename)
    return owner if isinstance(owner, str) else owner.get_username()


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


# The objects of one caller, for an operation to check in its own statement


def reach(user: _AnyUser, *codenames: str) -> Reach | None:
    """What ``user`` may touch: every object (``None``) with one of ``codenames``,
    else those it created or, for pauses, owns."""
    if has_any_perm(user, *codenames):
        return None
    return Reach(user.pk, user.get_username())


# What a listing shows


def visible_pauses(user: _AnyUser) -> Reach | None:
    """The pauses ``user`` may see, as a reach: all with ``view_pausedrun`` or
    ``change_pausedrun``, else those it created or owns."""
    return reach(user, "view_pausedrun", "change_pausedrun")


def visible_requests(user: _AnyUser) -> QuerySet[ApprovalRequest]:
    """The approval requests ``user`` may see: a reviewer (``view_approvalrequest`` or
    ``decide_approvalrequest``) sees the whole queue, anyone else those it filed."""
    if has_any_perm(user, "view_approvalrequest", "decide_approvalrequest"):
        return ApprovalRequest.objects.all()
    # A signed-in user: every agentstate view takes IsAuthenticated.
    return ApprovalRequest.objects.filed_by(cast("_User", user))


@functools.cache
def object_types() -> tuple[str, ...]:
    """The ``object_type`` an event can name: the model names of agentstate (read
    once: the app's models are fixed once Django is set up)."""
    return tuple(
        sorted(
            model._meta.model_name or "" for model in apps.get_app_config("agentstate").get_models()
        )
    )


def events_reach(user: _AnyUser) -> Reach | None:
    """The events ``user`` may see, as a reach: about objects it created or owns, or
    of a model it may view.

    ``view_event`` shows every event (``None``); ``decide_approvalrequest``, as it
    shows every request, every request's events. ``created_by`` and ``owner`` are
    copied onto the event, so the trail stays visible after its object is gone.
    """
    if has_model_perm(user, "view_event"):
        return None
    viewable = [name for name in object_types() if has_model_perm(user, f"view_{name}")]
    if "approvalrequest" not in viewable and has_model_perm(user, "decide_approvalrequest"):
        viewable.append("approvalrequest")  # a reviewer sees the whole queue (visible_requests)
    return Reach(user.pk, user.get_username(), tuple(viewable))


def visible_events(user: _AnyUser) -> EventQuerySet[Event]:
    """The events ``user`` may see (``events_reach``), as a QuerySet."""
    seen = events_reach(user)
    return Event.objects.all() if seen is None else Event.objects.reached_by(seen)
