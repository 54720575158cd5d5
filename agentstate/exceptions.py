"""The errors every service raises, each with its REST status and code.

One class per refusal, so Python callers catch what they mean and the REST
layer maps every one to ``{"detail", "code"}`` in one place.
"""


class AgentStateError(Exception):
    """Base of every refusal; ``status`` and ``code`` are what REST answers."""

    status = 400
    code = "invalid"
    default_detail = "Invalid request."

    def __init__(self, detail: str | None = None, *, field: str | None = None) -> None:
        self.detail = detail or self.default_detail
        self.field = field
        super().__init__(self.detail)


class BadInput(AgentStateError, ValueError):
    pass


class NotFound(AgentStateError, LookupError):
    status = 404
    code = "not_found"
    default_detail = "Not found."


class ScopeNotFound(NotFound):
    code = "scope_not_found"
    default_detail = "Scope not found."


class VariableNotFound(NotFound):
    code = "variable_not_found"
    default_detail = "Variable not found."


class PauseNotFound(NotFound):
    code = "pause_not_found"
    default_detail = "Pause not found."


class RunNotFound(NotFound):
    code = "run_not_found"
    default_detail = "Run not found."


class ApprovalRequestNotFound(NotFound):
    code = "approval_request_not_found"
    default_detail = "Approval request not found."


class Conflict(AgentStateError):
    status = 409
    code = "conflict"
    default_detail = "Conflict."


class TypeConflict(Conflict):
    code = "type_conflict"
    default_detail = "The variable's type does not allow this operation."


class VersionMismatch(AgentStateError):
    status = 412
    code = "version_mismatch"
    default_detail = "The variable's version does not match if_version."


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


class NotPending(Conflict):
    code = "not_pending"
    default_detail = "The pause is not pending."


class RunExists(Conflict):
    code = "run_exists"
    default_detail = "A run with this run_id already exists."


class AlreadyDecided(Conflict):
    code = "already_decided"
    default_detail = "The approval request was already decided."


class Expired(AgentStateError):
    status = 410
    code = "expired"
    default_detail = "Expired."


class PauseExpired(Expired):
    default_detail = "The pause expired before it was claimed."


class ApprovalRequestExpired(Expired):
    default_detail = "The approval request expired before it was decided."
