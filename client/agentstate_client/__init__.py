"""agentstate-client: a Python client for the REST API of an agentstate site.

``AgentStateClient`` has one method per endpoint; ``RemoteToolContext`` is
the Python API's ``ToolContext`` with its state kept by the server. It
needs only ``httpx`` (no Django). See the project's documentation,
``docs/client.md``.
"""

from .client import AgentStateClient, TokenAuth, error_from_response
from .errors import (
    AlreadyClaimed,
    AlreadyDecided,
    AlreadyResolved,
    APIError,
    ApprovalRequestExpired,
    ApprovalRequestNotFound,
    BadInput,
    BodyTooLarge,
    Conflict,
    Expired,
    HistoryForked,
    InvalidInput,
    NotAuthenticated,
    NotClaimed,
    NotFound,
    NotPending,
    PauseExpired,
    PauseNotFound,
    PermissionDenied,
    QuestionSuperseded,
    RunExists,
    RunNotFound,
    ScopeNotFound,
    ServiceUnavailable,
    TypeConflict,
    Unreachable,
    VariableNotFound,
    VersionMismatch,
)
from .toolcontext import RemoteSharedState, RemoteToolContext

__version__ = "0.1.0"

__all__ = [
    "AgentStateClient",
    "RemoteSharedState",
    "RemoteToolContext",
    "TokenAuth",
    "error_from_response",
    "APIError",
    "InvalidInput",
    "NotAuthenticated",
    "PermissionDenied",
    "NotFound",
    "ScopeNotFound",
    "VariableNotFound",
    "PauseNotFound",
    "RunNotFound",
    "ApprovalRequestNotFound",
    "Conflict",
    "TypeConflict",
    "VersionMismatch",
    "AlreadyClaimed",
    "AlreadyResolved",
    "QuestionSuperseded",
    "NotClaimed",
    "NotPending",
    "RunExists",
    "AlreadyDecided",
    "HistoryForked",
    "Expired",
    "PauseExpired",
    "ApprovalRequestExpired",
    "BodyTooLarge",
    "ServiceUnavailable",
    "Unreachable",
    "BadInput",
]
