"""Signals sent after the transaction that made a change commits.

Every signal is sent with ``sender`` the model class and these keyword
arguments:

- ``event``: the ``agentstate.models.Event`` row recording the change (kind,
  actor, user, object_type, object_id, details, created_at);
- ``instance``: the changed object as it was saved (for a cancelled pause,
  the object as it was before it was removed; for a bulk expiry, ``None``
  and ``event.object_id`` names it).

A rolled-back change sends nothing. ``event_recorded`` is sent for every
event in addition to the signal of its kind.

``deliveries_written`` is sent once per committed change that wrote webhook
deliveries, with ``sender`` the ``Delivery`` class and ``delivery_ids``:
agentstate's Celery tasks (``agentstate.tasks``, connected when Celery is
installed) hand them to the broker by it.
"""

from django.dispatch import Signal

pause_created = Signal()
pause_claimed = Signal()
pause_resolved = Signal()
pause_expired = Signal()
pause_cancelled = Signal()
approval_requested = Signal()
approval_decided = Signal()
approval_expired = Signal()
approvals_changed = Signal()
budget_set = Signal()
policy_created = Signal()
policy_revoked = Signal()
approval_voted = Signal()
approval_consumed = Signal()
approval_expiring = Signal()
approval_escalated = Signal()
rule_changed = Signal()
event_recorded = Signal()
deliveries_written = Signal()

# ``budget_set`` under its name from before its kind was "budget.set": the same signal.
budget_changed = budget_set

BY_KIND = {
    "pause.created": pause_created,
    "pause.claimed": pause_claimed,
    "pause.resolved": pause_resolved,
    "pause.expired": pause_expired,
    "pause.cancelled": pause_cancelled,
    "approval.requested": approval_requested,
    "approval.decided": approval_decided,
    "approval.expired": approval_expired,
    "approvals.changed": approvals_changed,
    "approvals.rebuilt": approvals_changed,
    "budget.set": budget_set,
    "policy.created": policy_created,
    "policy.revoked": policy_revoked,
    "approval.voted": approval_voted,
    "approval.consumed": approval_consumed,
    "approval.expiring": approval_expiring,
    "approval.escalated": approval_escalated,
    "rule.created": rule_changed,
    "rule.changed": rule_changed,
    "rule.deleted": rule_changed,
}
