"""Transaction helpers shared by every service."""

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from django.db import IntegrityError, OperationalError, connection, transaction

P = ParamSpec("P")
R = TypeVar("R")

ATTEMPTS = 5


def _is_transient(error: Exception) -> bool:
    """A deadlock, a serialization failure or a row removed under us."""
    if isinstance(error, IntegrityError):
        return True
    cause = getattr(error, "__cause__", None)
    sqlstate = getattr(cause, "sqlstate", None)
    return sqlstate in {"40001", "40P01"}


def atomic_retry(func: Callable[P, R]) -> Callable[P, R]:
    """Run ``func`` in one transaction, retried when it lost a race.

    Inside an enclosing transaction there is nothing to retry (the caller's
    transaction is already broken), so the error goes up unchanged; the
    function still runs in a savepoint, so a refusal raised halfway leaves
    none of its writes in the caller's transaction.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if connection.in_atomic_block:
            with transaction.atomic():
                return func(*args, **kwargs)
        for attempt in range(ATTEMPTS):
            try:
                with transaction.atomic():
                    return func(*args, **kwargs)
            except (IntegrityError, OperationalError) as error:
                if attempt == ATTEMPTS - 1 or not _is_transient(error):
                    raise
        raise AssertionError("unreachable")

    return wrapper


@contextmanager
def snapshot() -> Iterator[None]:
    """A read-only transaction whose queries all see one state.

    PostgreSQL: REPEATABLE READ for this transaction (no locks taken). SQLite:
    the transaction itself serializes against writers.
    """
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield
