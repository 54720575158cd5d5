"""What agentstate keeps, with its invariants as database constraints.

One module per area: context variables (``context``: ``Scope``, ``Variable``,
``Element``), paused runs (``pauses``: ``PausedRun``), runs with their usage
and tool-call approvals (``runs``: ``Run``, ``ApprovalRecord``,
``ApprovalCall``, ``ApprovalRequest``), standing decisions and caps
(``policies``: ``ApprovalPolicy``, ``Budget``), oversight (``oversight``:
``ApprovalRule``, ``Vote``), the audit trail (``events``:
``Event``), webhooks and their outbox (``webhooks``: ``Webhook``,
``Delivery``, ``DeliveryAttempt``) and LangGraph's checkpoints
(``langgraph``: ``Thread``, ``Checkpoint``, ``CheckpointBlob``,
``CheckpointWrite``). Every model is importable from here. The status and
decision values are written once, in ``choices``; what every area shares
(key lengths, index and constraint helpers) is in ``base``. Every state
change goes through ``agentstate.services``; the models only hold state and
filters (``agentstate.models.querysets``), and constraints hold each status
transition the database can check (a claimed pause has its ``claimed_at``, a
decided request its ``decided_at``, ...).

A foreign key that leads a unique constraint has no index of its own
(``db_index=False``): the constraint's index serves its lookups, and a second
one only costs writes and can lure the planner into scanning every element of
a long list.
"""

from agentstate.types import USAGE_FIELDS

from .base import KEY_LENGTH, RUN_ID_LENGTH, where_set
from .context import Element, Scope, Variable
from .events import Event
from .langgraph import Checkpoint, CheckpointBlob, CheckpointWrite, Thread
from .oversight import ApprovalRule, Vote
from .pauses import PausedRun
from .policies import ApprovalPolicy, Budget
from .runs import ApprovalCall, ApprovalRecord, ApprovalRequest, Run
from .webhooks import Delivery, DeliveryAttempt, Webhook

__all__ = [
    "KEY_LENGTH",
    "RUN_ID_LENGTH",
    "USAGE_FIELDS",
    "ApprovalCall",
    "ApprovalPolicy",
    "ApprovalRecord",
    "ApprovalRequest",
    "ApprovalRule",
    "Budget",
    "Checkpoint",
    "CheckpointBlob",
    "CheckpointWrite",
    "Delivery",
    "DeliveryAttempt",
    "Element",
    "Event",
    "PausedRun",
    "Run",
    "Scope",
    "Thread",
    "Variable",
    "Vote",
    "Webhook",
    "where_set",
]
