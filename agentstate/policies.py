"""Approval policies: which calls a policy matches, by the same rules in Python and SQL.

A policy matches a call of its ``tool_name`` in a run whose creator is its
``user`` (none: any run's), whose arguments contain its ``arguments``
pattern (none: any arguments). Containment is recursive over objects only:
a pattern object matches an object that has every one of its keys, each
value matching; anything else matches only an equal JSON value, so ``true``
is not ``1``, ``1`` is ``1.0``, and an array equals only the same array (not
a superset, nor the same items in another order). The ORM backend matches
here; the PostgreSQL backend states the same rules in SQL
(``agentstate_json_contains`` in ``backends/postgresql/sql/35_policies.sql``),
and a property test holds the two to one answer.

A policy is active while it is not revoked and not past ``expires_at`` by
the database clock (``active``).
"""

from decimal import Decimal
from typing import Any

from django.db.models import Q
from django.db.models.functions import Now

__all__ = ["DECIDED_BY_POLICY", "active", "contains", "decided_reason", "json_equal"]

# The reason of a request a policy decided, when the policy gives none.
DECIDED_BY_POLICY = "Decided by approval policy %s."
# Who the run's records name as having decided a call that a policy decided.
POLICY_ACTOR = "policy:%s"


def _number(value: int | float) -> Decimal:
    """A JSON number's value as its text says (what ``jsonb`` compares), not as binary."""
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def json_equal(a: Any, b: Any) -> bool:
    """Equal as JSON values: same type (a boolean is no number), numbers by value,
    arrays item by item in order, objects with the same keys and equal values."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) or isinstance(b, int | float):
        return (
            isinstance(a, int | float) and isinstance(b, int | float) and _number(a) == _number(b)
        )
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        return (
            isinstance(a, list | tuple)
            and isinstance(b, list | tuple)
            and len(a) == len(b)
            and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)
    return False


def contains(value: Any, pattern: Any) -> bool:
    """Whether a call's arguments ``value`` contain ``pattern``: a pattern object needs an
    object holding each of its keys with a value that contains the pattern's; any
    other pattern needs an equal value (``json_equal``)."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            key in value and contains(value[key], wanted) for key, wanted in pattern.items()
        )
    return json_equal(value, pattern)


def matches(pattern: Any, arguments: Any) -> bool:
    """Whether a policy's ``arguments`` pattern (``None``: any) matches a call's
    arguments; arguments not given (``None``) match only a policy without a pattern."""
    return pattern is None or (arguments is not None and contains(arguments, pattern))


def active() -> Q:
    """The policies in force now, by the database clock: not revoked, not expired."""
    return Q(revoked_at__isnull=True) & (Q(expires_at__isnull=True) | Q(expires_at__gt=Now()))


def decided_reason(policy_id: int, reason: str) -> str:
    """The reason a request decided by a policy keeps: the policy's own, or one naming it."""
    return reason or DECIDED_BY_POLICY % policy_id
