"""Who made a change, as every service takes it: ``by=``.

``by`` is a user (anonymous or none: no user), a name (a string, such as an
agent's or a worker's), or an ``Actor`` (both). The services took it as
``user=`` or ``actor=`` before; ``takes_by`` keeps those keywords for one
release, with a ``DeprecationWarning``.
"""

import functools
import warnings
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser

from agentstate.types import Actor

__all__ = ["By", "acting", "takes_by"]

By = AbstractBaseUser | AnonymousUser | str | Actor | None

P = ParamSpec("P")
R = TypeVar("R")


def acting(by: Any) -> Actor:
    """``by`` as its events record it: the user's id, and the name (else the username)."""
    if isinstance(by, Actor):
        return by
    if isinstance(by, str):
        return Actor(name=by)
    return Actor.of(by)


def takes_by(*old: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Let the decorated service take ``by=`` also as its old keywords ``old``
    (``"user"``, ``"actor"``), warning that they go away in the next release.
    ``user=`` and ``actor=`` given together are that user under that name."""

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            # in the order (user, actor), as Actor.of takes them
            given: dict[str, Any] = {
                name: kwargs.pop(name)
                for name in ("user", "actor")
                if name in old and name in kwargs
            }
            if given:
                names = ", ".join(f"{name}=" for name in given)
                warnings.warn(
                    f"agentstate: {func.__qualname__}() takes who made the change as by=;"
                    f" {names} is deprecated and will be removed in the next release.",
                    DeprecationWarning,
                    stacklevel=2,
                )
                if "by" in kwargs:
                    raise TypeError(f"{func.__qualname__}() got by= and {names}")
                both = len(given) == 2
                kwargs["by"] = (
                    Actor.of(given["user"], given["actor"]) if both else next(iter(given.values()))
                )
            return func(*args, **kwargs)

        return wrapper

    return decorate
