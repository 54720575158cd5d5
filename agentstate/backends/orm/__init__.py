"""The portable backend, on Django's ORM: SQLite and any other database.

Each operation is one transaction (``db.atomic``: run again after a
deadlock, a serialization failure or SQLite's busy error, never after a
constraint violation). Writes lock their row first with ``SELECT ... FOR
UPDATE`` where the database has it; SQLite's IMMEDIATE transactions
serialize writers instead. Creation races are settled by upserts
(``INSERT ... ON CONFLICT``, ``ON DUPLICATE KEY UPDATE`` on MySQL and MariaDB)
or ignored duplicates; only a run's creation, which must tell the caller that
the id exists, turns the violation of that one unique key into ``RunExists``.
Locks that only guard a row against deletion are ``FOR NO KEY UPDATE`` where the
database has it (PostgreSQL), ``FOR UPDATE`` elsewhere.
"""

from agentstate.backends.base import Backend

from .auth import AuthOperations
from .budgets import BudgetOperations
from .checkpoints import CheckpointOperations
from .context import ContextOperations
from .pauses import PauseOperations
from .runs import RunOperations
from .store import StoreOperations
from .sweep import SweepOperations
from .trail import TrailOperations


class ORMBackend(
    AuthOperations,
    StoreOperations,
    ContextOperations,
    PauseOperations,
    RunOperations,
    BudgetOperations,
    CheckpointOperations,
    SweepOperations,
    TrailOperations,
    Backend,
):
    """Every operation of ``Backend`` as one ORM transaction (``Operations.atomic``)."""
