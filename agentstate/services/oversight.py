"""Oversight: approval rules per tool, and using an approval once.

A rule (``create_rule``, ``change_rule``, ``delete_rule``) says who decides a
tool's requests (``reviewers``, a group; ``escalate_to`` after
``escalate_after`` seconds), how many distinct reviewers must approve the same
arguments (``approvals_required``), whether the run's creator may decide them
(``allow_self_approval``), how long they stay pending (``deadline`` seconds,
default ``APPROVAL_TTL``) and what the deadline does (``on_deadline``:
``expire``, ``reject`` or ``approve``), and when one ``approval.expiring`` is
written (``remind_before`` seconds before the deadline). A request copies its
tool's rule when it is filed; ``approvals.decide`` enforces it, and the sweep
applies its deadline (``sweep.sweep``).

``consume`` uses an approved call's approval once, for the arguments it was
approved with (their ``arguments_digest``): what a bridge does before it runs
the tool.
"""

from typing import Any

from django.contrib.auth.models import Group
from django.db.models import QuerySet

from agentstate import events
from agentstate.backends import backend
from agentstate.exceptions import BadInput, RuleNotFound
from agentstate.models import ApprovalRequest, ApprovalRule
from agentstate.models.choices import OnDeadline
from agentstate.services import runs
from agentstate.types import Reach, arguments_digest
from agentstate.validation import check_json, check_key

from .acting import By, acting

__all__ = [
    "MAX_APPROVALS",
    "MAX_SECONDS",
    "RULE_DEFAULTS",
    "change_rule",
    "consume",
    "create_rule",
    "delete_rule",
    "rules",
]

# The most reviewers a rule may require, and the longest of its periods (ten years).
MAX_APPROVALS = 1000
MAX_SECONDS = 10 * 365 * 24 * 3600
MAX_ID = 2**63 - 1
# A rule's values and their defaults, as ``create_rule`` takes them.
RULE_DEFAULTS: dict[str, Any] = {
    "approvals_required": 1,
    "reviewers": None,
    "allow_self_approval": False,
    "deadline": None,
    "on_deadline": OnDeadline.EXPIRE.value,
    "remind_before": None,
    "escalate_after": None,
    "escalate_to": None,
}


def _seconds(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SECONDS:
        raise BadInput(f"{field} must be 1 to {MAX_SECONDS} seconds, or null.", field=field)
    return value


def _group(value: Any, field: str) -> int | None:
    """A group, by itself or by name, as its id (``None``: none)."""
    if value is None:
        return None
    if isinstance(value, Group) and value.pk is not None:
        return int(value.pk)
    if isinstance(value, str):
        check_key(value, field, 150)
        found = Group.objects.filter(name=value).values_list("pk", flat=True).first()
        if found is None:
            raise BadInput(f"No group named {value!r}.", field=field)
        return int(found)
    raise BadInput(f"{field} must be a group's name or null.", field=field)


def _checked(values: dict[str, Any]) -> dict[str, Any]:
    """The rule's values as the backend stores them (groups as ids), each checked."""
    checked: dict[str, Any] = {}
    for name, value in values.items():
        if name == "tool_name":
            checked[name] = check_key(value, name)
        elif name == "approvals_required":
            if isinstance(value, bool) or not isinstance(value, int):
                raise BadInput("approvals_required must be an integer.", field=name)
            if not 1 <= value <= MAX_APPROVALS:
                raise BadInput(f"approvals_required must be 1 to {MAX_APPROVALS}.", field=name)
            checked[name] = value
        elif name in ("reviewers", "escalate_to"):
            checked[f"{name}_id"] = _group(value, name)
        elif name == "allow_self_approval":
            if not isinstance(value, bool):
                raise BadInput(f"{name} must be true or false.", field=name)
            checked[name] = value
        elif name in ("deadline", "remind_before", "escalate_after"):
            checked[name] = _seconds(value, name)
        elif name == "on_deadline":
            if value not in OnDeadline.values:
                raise BadInput("on_deadline must be 'expire', 'reject' or 'approve'.", field=name)
            checked[name] = value
        else:
            raise BadInput(f"Unknown field {name!r}.", field=name)
    return checked


def _check_together(rule: dict[str, Any]) -> None:
    """What a rule's values must say together."""
    deadline, remind = rule.get("deadline"), rule.get("remind_before")
    if deadline is not None and remind is not None and remind >= deadline:
        raise BadInput("remind_before must be shorter than the deadline.", field="remind_before")
    if (rule.get("escalate_after") is None) != (rule.get("escalate_to_id") is None):
        raise BadInput(
            "escalate_after and escalate_to go together: both or neither.",
            field="escalate_to" if rule.get("escalate_to_id") is None else "escalate_after",
        )


def _rule_pk(rule: ApprovalRule | int) -> int:
    pk = rule.pk if isinstance(rule, ApprovalRule) else rule
    if isinstance(pk, bool) or not isinstance(pk, int) or not 0 < pk <= MAX_ID:
        raise RuleNotFound.of(rule_id=pk)
    return pk


def create_rule(tool_name: str, *, by: By = None, **values: Any) -> ApprovalRule:
    """A new rule for ``tool_name``, its values ``RULE_DEFAULTS`` but those given
    (``reviewers``, ``escalate_to``: a ``Group`` or a group's name). ``RuleExists``
    when the tool has one. Event ``rule.created``."""
    unknown = set(values) - set(RULE_DEFAULTS)
    if unknown:
        name = sorted(unknown)[0]
        raise BadInput(f"Unknown field {name!r}.", field=name)
    checked = _checked({"tool_name": tool_name, **RULE_DEFAULTS, **values})
    _check_together(checked)
    changed = backend().create_rule(checked, acting(by))
    events.announce(changed.events, ApprovalRule, changed.value)
    return changed.value


def change_rule(rule: ApprovalRule | int, *, by: By = None, **values: Any) -> ApprovalRule:
    """Change some of the rule's values (as ``create_rule`` takes them, ``tool_name``
    too). Requests filed before keep the rule as they copied it. ``RuleNotFound``.
    Event ``rule.changed``."""
    pk = _rule_pk(rule)
    checked = _checked(values)
    current = ApprovalRule.objects.filter(pk=pk).values().first()
    if current is None:
        raise RuleNotFound.of(rule_id=pk)
    _check_together({**current, **checked})
    changed = backend().change_rule(pk, checked, acting(by))
    events.announce(changed.events, ApprovalRule, changed.value)
    return changed.value


def delete_rule(rule: ApprovalRule | int, *, by: By = None) -> ApprovalRule:
    """Delete the rule: later requests of its tool are filed under none; those
    filed before keep it. ``RuleNotFound``. Event ``rule.deleted``."""
    changed = backend().delete_rule(_rule_pk(rule), acting(by))
    events.announce(changed.events, ApprovalRule, changed.value)
    return changed.value


def rules(*, tool_name: str | None = None) -> QuerySet[ApprovalRule]:
    """The rules by tool name, with their groups."""
    rows = ApprovalRule.objects.select_related("reviewers", "escalate_to")
    return rows if tool_name is None else rows.filter(tool_name=tool_name)


def consume(
    run: runs.RunRef,
    tool_name: str,
    call_id: str,
    arguments: Any = None,
    *,
    digest: str | None = None,
    by: By = None,
    reach: Reach | None = None,
) -> ApprovalRequest:
    """Use the approval of the call once, for the arguments about to run (given as
    ``arguments`` or their ``digest``): its request gets ``consumed_at``. The
    first time for an approved call with that digest; then ``AlreadyConsumed``;
    ``NotApproved`` (no approved request of the call) or ``ArgumentsChanged``
    (approved with other arguments) otherwise. Event ``approval.consumed``."""
    check_key(tool_name, "tool_name")
    check_key(call_id, "call_id")
    if digest is None:
        check_json(arguments, "arguments")
        digest = arguments_digest(arguments)
    else:
        runs.check_digest(digest)
    changed = backend().consume(runs.run_id_of(run), tool_name, call_id, digest, reach, acting(by))
    events.announce(changed.events, ApprovalRequest, changed.value)
    return changed.value
