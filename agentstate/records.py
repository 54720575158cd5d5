"""Approval records in the OpenAI Agents SDK's form: reading them and deciding by them.

Per tool name, ``{"approved": true | false | [call ids], "rejected": ...}``,
as the SDK's ``RunContextWrapper`` serializes them, so a client can hand the
map back. A boolean side is stored in ``ApprovalRecord.approved_always`` /
``rejected_always``; a list side is ``None`` there and its call ids are
``ApprovalCall`` rows. The services, the admin and the ORM backend read
records through these functions; the PostgreSQL backend states the same
rules in SQL (``backends/postgresql/sql/30_runs.sql``).
"""

from collections.abc import Mapping

from agentstate.models import ApprovalCall, ApprovalRecord

__all__ = [
    "APPROVE",
    "DECIDED_BY_RECORDS",
    "REJECT",
    "RECORDS_ACTOR",
    "SIDES",
    "decide_from",
    "decided_always",
    "record_json",
]

# Plain strings: a TextChoices member hashes by its name, not its value.
APPROVE, REJECT = str(ApprovalCall.Decision.APPROVE.value), str(ApprovalCall.Decision.REJECT.value)
SIDES = {"approved": APPROVE, "rejected": REJECT}
# The reason of a request filed already decided because the records decide its call,
# and the actor of its ``approval.decided`` event.
DECIDED_BY_RECORDS = "Decided by the run's approval records."
RECORDS_ACTOR = "records"


def record_json(
    record: ApprovalRecord, calls: list[tuple[str, str]] | None = None
) -> dict[str, bool | list[str]]:
    """One tool's ``{"approved", "rejected"}``: a flag, or the call ids in decision order.

    ``calls``: the record's ``(decision, call_id)`` pairs in that order, when
    already read; else they are read.
    """
    if calls is None:
        calls = [(c.decision, c.call_id) for c in sorted(record.calls.all(), key=lambda c: c.pk)]
    ids: dict[str, list[str]] = {APPROVE: [], REJECT: []}
    for decision, call_id in calls:
        ids[decision].append(call_id)
    return {
        "approved": ids[APPROVE] if record.approved_always is None else record.approved_always,
        "rejected": ids[REJECT] if record.rejected_always is None else record.rejected_always,
    }


def decide_from(record: Mapping[str, bool | list[str]] | None, call_id: str) -> bool | None:
    """The SDK's precedence over one tool's record.

    Permanent approval wins over permanent rejection; then permanent
    rejection; then the call id in ``approved`` (even if also in
    ``rejected``); then in ``rejected``; else ``None`` (undecided).
    """
    if record is None:
        return None
    approved, rejected = record.get("approved"), record.get("rejected")
    if approved is True:
        return True
    if rejected is True:
        return False
    if isinstance(approved, list) and call_id in approved:
        return True
    if isinstance(rejected, list) and call_id in rejected:
        return False
    return None


def decided_always(record: Mapping[str, bool | list[str]]) -> bool:
    """Whether a permanent flag decides every call of the record's tool."""
    return record["approved"] is True or record["rejected"] is True
