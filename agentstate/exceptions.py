"""The errors every service raises, each with its REST status and code.

One class per refusal, so Python callers catch what they mean and the REST
layer maps every one to ``{"detail", "code"}`` in one place.
"""

from typing import Any


class AgentStateError(Exception):
    """Base of every refusal; ``status`` and ``code`` are what REST answers.

    ``template`` words the detail from the facts of the case (``facts()``),
    so that every backend refuses in the same words.
    """

    status = 400
    code = "invalid"
    default_detail = "Invalid request."
    template: str | None = None

    def __init__(self, detail: str | None = None, *, field: str | None = None) -> None:
        self.detail = detail or self.default_detail
        self.field = field
        super().__init__(self.detail)

    def extra(self) -> dict[str, Any]:
        """What the REST body carries besides ``detail``, ``code`` and ``field``."""
        return {}

    @classmethod
    def of(cls, *, field: str | None = None, **facts: Any) -> "AgentStateError":
        """The refusal worded by ``template`` from ``facts``."""
        return cls(cls.template.format(**facts) if cls.template and facts else None, field=field)


class BadInput(AgentStateError, ValueError):
    pass


class UnknownOwner(BadInput):
    """A named owner that is no user of the site."""

    template = "No user named {username!r}."

    @classmethod
    def of(cls, *, field: str | None = "owner", **facts: Any) -> "AgentStateError":
        return super().of(field=field, **facts)


class PastExpiry(BadInput):
    """A policy's ``expires_at`` not in the future by the database's clock."""

    default_detail = "expires_at must be in the future."

    @classmethod
    def of(cls, *, field: str | None = "expires_at", **facts: Any) -> "AgentStateError":
        return super().of(field=field, **facts)


class NotFound(AgentStateError, LookupError):
    status = 404
    code = "not_found"
    default_detail = "Not found."


class ScopeNotFound(NotFound):
    code = "scope_not_found"
    default_detail = "Scope not found."
    template = "Scope {scope!r} not found."


class VariableNotFound(NotFound):
    code = "variable_not_found"
    default_detail = "Variable not found."
    template = "No variable {name!r} in scope {scope!r}."


class PauseNotFound(NotFound):
    code = "pause_not_found"
    default_detail = "Pause not found."
    template = "No pause for chat {chat_id!r}, tool call {tool_call_id!r}."


class RunNotFound(NotFound):
    code = "run_not_found"
    default_detail = "Run not found."
    template = "Run {run_id!r} not found."


class ApprovalRequestNotFound(NotFound):
    code = "approval_request_not_found"
    default_detail = "Approval request not found."
    template = "Approval request {id} not found."


class UserNotFound(NotFound):
    code = "user_not_found"
    default_detail = "User not found."
    template = "No user named {username!r}."


class PolicyNotFound(NotFound):
    code = "not_found"
    default_detail = "Approval policy not found."
    template = "Approval policy {policy_id} not found."


class Conflict(AgentStateError):
    status = 409
    code = "conflict"
    default_detail = "Conflict."


class TypeConflict(Conflict):
    code = "type_conflict"
    default_detail = "The variable's type does not allow this operation."
    template = "Variable {name!r} holds {held}, which {operation} cannot take."

    # What a variable holds, by its JSON type (jsonb_typeof's names).
    HELD = {
        "object": "an object",
        "array": "an array",
        "empty array": "an empty list",
        "string": "a string",
        "number": "a number",
        "boolean": "a boolean",
        "null": "null",
    }

    @classmethod
    def of(cls, *, field: str | None = None, **facts: Any) -> "AgentStateError":
        facts["held"] = cls.HELD.get(facts["held"], facts["held"])
        return super().of(field=field, **facts)


class VersionMismatch(AgentStateError):
    status = 412
    code = "version_mismatch"
    default_detail = "The variable's version does not match if_version."
    template = "Variable {name!r} is at version {version}, not {if_version}."


class UsageOverflow(BadInput):
    """A usage total would pass what its column holds; nothing was added."""

    template = "{field} would exceed the largest total, 2**63 - 1."

    @classmethod
    def of(cls, *, field: str | None = None, **facts: Any) -> "AgentStateError":
        return cls(cls.template.format(field=field), field=field)


class AlreadyClaimed(Conflict):
    code = "already_claimed"
    default_detail = "The pause was already claimed."


class AlreadyResolved(Conflict):
    code = "already_resolved"
    default_detail = "The pause was already resolved."


class QuestionSuperseded(Conflict):
    code = "question_superseded"
    default_detail = "The pause now waits on another question."


class NotClaimed(Conflict):
    code = "not_claimed"
    default_detail = "The pause is not claimed."
    template = "The pause is {status}, not claimed."


class NotPending(Conflict):
    code = "not_pending"
    default_detail = "The pause is not pending."
    template = "The pause is {status}, not pending."


class RunExists(Conflict):
    code = "run_exists"
    default_detail = "A run with this run_id already exists."
    template = "A run with run_id {run_id!r} already exists."


class AlreadyDecided(Conflict):
    code = "already_decided"
    default_detail = "The approval request was already decided."
    template = "The approval request was already {status}{by}."

    @classmethod
    def of(cls, *, field: str | None = None, **facts: Any) -> "AgentStateError":
        """From ``status`` and ``decided_by_id``: the decider is named by username,
        looked up here, on the refusal only (no backend's SQL knows the user model)."""
        from django.contrib.auth import get_user_model

        decided_by_id = facts.pop("decided_by_id", None)
        username = None
        if decided_by_id is not None:
            decider = get_user_model()._default_manager.filter(pk=decided_by_id).first()
            username = None if decider is None else decider.get_username()
        return super().of(field=field, **facts, by=f" by {username}" if username else "")


class AlreadyRevoked(Conflict):
    code = "already_revoked"
    default_detail = "The approval policy was already revoked."
    template = "Approval policy {policy_id} was already revoked."


class BudgetExceeded(Conflict):
    """An ``add_usage`` that would take a budget past a cap: nothing was added.

    ``budget`` names the budget (``"run"`` or ``"user"``), ``counter`` the first
    capped counter it would pass; REST answers both beside ``detail`` and ``code``.
    """

    code = "budget_exceeded"
    default_detail = "The usage would exceed a budget."
    template = (
        "Adding {increment} {counter} would exceed the {budget} budget's cap of {cap}"
        " ({used} used); nothing was added."
    )

    def __init__(
        self,
        detail: str | None = None,
        *,
        field: str | None = None,
        budget: str = "",
        counter: str = "",
    ) -> None:
        super().__init__(detail, field=field)
        self.budget = budget
        self.counter = counter

    @classmethod
    def of(cls, *, field: str | None = None, **facts: Any) -> "AgentStateError":
        """From ``budget``, ``counter``, ``increment``, ``cap`` and ``used``."""
        return cls(cls.template.format(**facts), budget=facts["budget"], counter=facts["counter"])

    def extra(self) -> dict[str, Any]:
        return {"budget": self.budget, "counter": self.counter}


class HistoryForked(Conflict):
    """A LangGraph checkpoint put on a parent that already has a child (another
    writer of the thread went on from it first); nothing was written."""

    code = "history_forked"
    default_detail = "The thread's history already goes on from this checkpoint."
    template = (
        "Thread {thread_id!r} (namespace {checkpoint_ns!r}) already goes on from"
        " checkpoint {parent!r}: another writer put {head!r} first."
    )


class AlreadyVoted(Conflict):
    code = "already_voted"
    default_detail = "You already voted on this approval request."
    template = "You already voted on approval request {id}."


class AlreadyConsumed(Conflict):
    code = "already_consumed"
    default_detail = "The approval was already used."
    template = "The approval of call {call_id!r} of {tool_name!r} was already used."


class NotApproved(Conflict):
    code = "not_approved"
    default_detail = "The call is not approved."
    template = "Call {call_id!r} of {tool_name!r} is not approved."


class ArgumentsChanged(Conflict):
    code = "arguments_changed"
    default_detail = "The arguments differ from the approved ones."
    template = "Call {call_id!r} of {tool_name!r} was approved with other arguments."


class SelfApproval(AgentStateError):
    status = 403
    code = "self_approval"
    default_detail = (
        "You may not decide calls in a run you created: the tool's approval rule does not allow it."
    )


class NotAReviewer(AgentStateError):
    status = 403
    code = "not_a_reviewer"
    default_detail = "You are not a reviewer of this tool's approval requests."
    template = "You are not among the reviewers of {tool_name!r}."
    escalated = (
        "You decide {tool_name!r}'s request by escalation only: approve it without"
        " 'always', which would approve its later calls in the run too."
    )

    @classmethod
    def of(cls, *, field: str | None = None, **facts: Any) -> "AgentStateError":
        """As ``AgentStateError.of``; with ``escalated``, the words for an "always" by a
        member of the escalation group alone."""
        if facts.pop("escalated", False):
            return cls(cls.escalated.format(**facts), field=field)
        return super().of(field=field, **facts)


class VotesRequired(AgentStateError):
    """A standing approval (a policy, or an approval written into a run's records) of
    a tool whose rule wants more than one reviewer: one person would decide alone."""

    status = 403
    code = "votes_required"
    default_detail = (
        "This tool needs several reviewers' approvals, so no one approves its calls alone."
    )
    template = (
        "{tool_name!r} needs {approvals_required} reviewers' approvals, so no one approves"
        " its calls alone: not in a run's records, by a policy, or with 'always'."
    )


class RuleNotFound(NotFound):
    code = "not_found"
    default_detail = "Approval rule not found."
    template = "Approval rule {rule_id} not found."


class RuleExists(Conflict):
    code = "rule_exists"
    default_detail = "An approval rule for this tool already exists."
    template = "An approval rule for {tool_name!r} already exists."


class Expired(AgentStateError):
    status = 410
    code = "expired"
    default_detail = "Expired."


class PauseExpired(Expired):
    default_detail = "The pause expired before it was claimed."


class ApprovalRequestExpired(Expired):
    default_detail = "The approval request expired before it was decided."


def refusal(name: str, facts: dict[str, Any]) -> AgentStateError:
    """The refusal a backend names (``"PauseExpired"``) with the facts of the case;
    ``facts["field"]`` names the bad field of a ``BadInput``."""
    cls = globals().get(name)
    if not (isinstance(cls, type) and issubclass(cls, AgentStateError)):
        raise LookupError(f"No agentstate refusal named {name!r}.")
    return cls.of(**facts)
