"""The errors of the agentstate REST client, one class per refusal.

Every error is an ``APIError`` with the ``status`` and ``code`` the server
answered; each refusal has the name and the code of the service error that
``agentstate.exceptions`` raises in the Django site (``AlreadyClaimed``,
``PauseExpired``, ``VersionMismatch``, ...), so code written against the
services reads the same against the client. They are separate classes: this
package never imports the Django app.
"""

from __future__ import annotations

import httpx


class APIError(Exception):
    """A refusal from the server (or no answer at all); ``status`` and ``code`` as sent.

    ``detail`` is the server's message and ``field`` the first bad field of a
    400; ``response`` is the ``httpx.Response`` (``None`` when there was none).
    """

    status: int = 0
    code: str = "error"

    def __init__(
        self,
        detail: str | None = None,
        *,
        field: str | None = None,
        status: int | None = None,
        code: str | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        self.detail = detail or f"{type(self).__name__}."
        self.field = field
        super().__init__(self.detail)
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code
        self.response = response


class InvalidInput(APIError, ValueError):
    """400 ``invalid`` or ``parse_error``; ``field`` names the first bad field."""

    status = 400
    code = "invalid"


class NotAuthenticated(APIError):
    status = 401
    code = "not_authenticated"


class PermissionDenied(APIError, PermissionError):
    status = 403
    code = "permission_denied"


class NotFound(APIError, LookupError):
    status = 404
    code = "not_found"


class ScopeNotFound(NotFound):
    code = "scope_not_found"


class VariableNotFound(NotFound):
    code = "variable_not_found"


class PauseNotFound(NotFound):
    code = "pause_not_found"


class RunNotFound(NotFound):
    code = "run_not_found"


class ApprovalRequestNotFound(NotFound):
    code = "approval_request_not_found"


class UserNotFound(NotFound):
    code = "user_not_found"


class PolicyNotFound(NotFound):
    """An approval policy not found (the code is the generic ``not_found``)."""


class Conflict(APIError):
    status = 409
    code = "conflict"


class TypeConflict(Conflict):
    code = "type_conflict"


class VersionMismatch(APIError):
    status = 412
    code = "version_mismatch"


class AlreadyClaimed(Conflict):
    code = "already_claimed"


class AlreadyResolved(Conflict):
    code = "already_resolved"


class QuestionSuperseded(Conflict):
    code = "question_superseded"


class NotClaimed(Conflict):
    code = "not_claimed"


class NotPending(Conflict):
    code = "not_pending"


class RunExists(Conflict):
    code = "run_exists"


class AlreadyDecided(Conflict):
    code = "already_decided"


class AlreadyRevoked(Conflict):
    code = "already_revoked"


class BudgetExceeded(Conflict):
    """An add of usage that would pass a budget's cap; nothing was added. ``budget``
    is ``"run"`` or ``"user"``, ``counter`` the counter whose cap it would pass."""

    code = "budget_exceeded"

    def __init__(
        self,
        detail: str | None = None,
        *,
        field: str | None = None,
        status: int | None = None,
        code: str | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        super().__init__(detail, field=field, status=status, code=code, response=response)
        body: object = None
        if response is not None:
            try:
                body = response.json()
            except ValueError:
                body = None
        facts = body if isinstance(body, dict) else {}
        self.budget = str(facts.get("budget", ""))
        self.counter = str(facts.get("counter", ""))


class AlreadyVoted(Conflict):
    code = "already_voted"


class AlreadyConsumed(Conflict):
    code = "already_consumed"


class NotApproved(Conflict):
    code = "not_approved"


class ArgumentsChanged(Conflict):
    code = "arguments_changed"


class SelfApproval(PermissionDenied):
    code = "self_approval"


class NotAReviewer(PermissionDenied):
    code = "not_a_reviewer"


class VotesRequired(PermissionDenied):
    """A standing approval (a records approval, a policy, an ``always``) where the
    tool's approval rule wants more than one reviewer."""

    code = "votes_required"


class RuleNotFound(NotFound):
    """An approval rule not found (the code is the generic ``not_found``)."""


class RuleExists(Conflict):
    code = "rule_exists"


class HistoryForked(Conflict):
    code = "history_forked"


class Expired(APIError):
    status = 410
    code = "expired"


class PauseExpired(Expired):
    """The server's ``expired`` for this kind of object."""


class ApprovalRequestExpired(Expired):
    """The server's ``expired`` for this kind of object."""


class BodyTooLarge(APIError):
    status = 413
    code = "body_too_large"


class ServiceUnavailable(APIError):
    """503: the server's database is unreachable; nothing was changed."""

    status = 503
    code = "unavailable"


class Unreachable(ServiceUnavailable, ConnectionError):
    """No answer: the connection failed or timed out (``status`` 0)."""

    status = 0
    code = "unreachable"


BadInput = InvalidInput
"""The services' name for a 400."""
