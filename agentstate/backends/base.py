"""The storage interface every service calls: one method per operation.

A backend does the operation's reads and writes, its audit events included,
atomically, and refuses with the exceptions of ``agentstate.exceptions``.
The services before it check their arguments (``agentstate.validation``) and
send the signals of the events it returns after commit
(``agentstate.events.announce``), so a backend never validates input nor
sends signals, and two backends differ only in how they store.

Two implementations, one per kind of database:

- ``agentstate.backends.orm.ORMBackend``, on Django's ORM: one transaction per
  operation, row locks (``SELECT ... FOR UPDATE``) where the database has
  them (SQLite's IMMEDIATE transactions serialize writers instead);
- ``agentstate.backends.postgresql.PostgreSQLBackend``: every operation is
  one round trip, a single call of a PL/pgSQL function that a migration
  installs (``agentstate/backends/postgresql/sql/``).

``Reach`` says whose objects an operation may touch, so that a REST caller's
access is decided inside the operation's own statement: an object outside
the reach answers "not found", exactly like a missing one.
"""

from __future__ import annotations

import abc
import uuid
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentstate.types import (
    Actor,
    Owner,
    Put,
    Reach,
    Records,
    StoredCheckpoint,
    Verdict,
    Write,
    WriteCall,
)

if TYPE_CHECKING:
    from django.db.models import Model

    from agentstate.models import (
        ApprovalPolicy,
        ApprovalRequest,
        ApprovalRule,
        Budget,
        Event,
        PausedRun,
        Run,
    )

T = TypeVar("T")

# A listing's filters by name: each an exact value (a pause's: ``owner``,
# ``chat_id``, ``tool_call_id`` and ``status``).
PauseFilters = dict[str, str]
# An approval requests' listing's: ``status``, ``tool_name`` and ``run_id``.
RequestFilters = dict[str, str]
# An events listing's: ``kind``, ``object_type``, ``object_id`` and ``run_id``.
EventFilters = dict[str, str]


# A stored value's type when its bytes are compressed: this prefix, then the serde's.
COMPRESSED = "zlib+"
# Values at least this long are compressed when that saves at least a fifth.
COMPRESS_FROM = 512


def packed(kind: str, value: bytes) -> tuple[str, bytes]:
    """A serialized value as it is stored: compressed (``COMPRESSED`` + its type)
    when long enough and that pays, else as it is."""
    if len(value) >= COMPRESS_FROM:
        smaller = zlib.compress(value, 1)
        if len(smaller) <= len(value) * 0.8:
            return COMPRESSED + kind, smaller
    return kind, value


# A small value's type when its bytes are compressed on ``DICTIONARY`` (``squeezed``).
SQUEEZED = "zd+"
# Values at least this long are tried by ``squeezed``.
SQUEEZE_FROM = 48
# What ``squeezed`` compresses on: LangChain's messages as LangGraph's serializer
# writes them (msgpack), their fields' names repeated in every one. Values stored
# on it are read with it: never to change (a new one would need a new prefix).
DICTIONARY = (
    b"\xa8messages\xa9__start__\xadfinish_reason\xaamodel_name\xabtoken_usage\xacinput_tokens"
    b"\xadoutput_tokens\xactotal_tokens\xb3input_token_details\xb4output_token_details"
    b"\xaacache_read\xa9reasoning\xabstop_reason\xb0tool_call_chunks\xa4args"
    b"\x05\x94\xbelangchain_core.messages.system\xadSystemMessage\x86\xa7content\xa0\xb1ad"
    b"ditional_kwargs\x80\xb1response_metadata\x80\xa4type\xa6system\xa4name\xc0\xa2id\xc0\xb3mo"
    b"del_validate_json\x05\x94\xbclangchain_core.messages.tool\xabToolMessage"
    b"\x89\xa7content\xa0\xb1additional_kwargs\x80\xb1response_metadata\x80\xa4type\xa4tool\xa4n"
    b"ame\xc0\xa2id\xc0\xactool_call_id\xa0\xa8artifact\xc0\xa6status\xa7success\xb3model_valida"
    b"te_json\x05\x94\xbalangchain_core.messages.ai\xa9AIMessage\x89\xa7content\xa0\xb1add"
    b"itional_kwargs\x80\xb1response_metadata\x80\xa4type\xa2ai\xa4name\xc0\xa2id\xc0\xaatool_ca"
    b"lls\x91\x84\xa4name\xa0\xa4args\x80\xa2id\xa0\xa4type\xa9tool_call\xb2invalid_tool_calls\x90\xaeusa"
    b"ge_metadata\xc0\xb3model_validate_json\x05\x94\xbalangchain_core.messages.a"
    b"i\xa9AIMessage\x89\xa7content\xa0\xb1additional_kwargs\x80\xb1response_metadata\x80\xa4"
    b"type\xa2ai\xa4name\xc0\xa2id\xc0\xaatool_calls\x90\xb2invalid_tool_calls\x90\xaeusage_meta"
    b"data\xc0\xb3model_validate_json\x05\x94\xbdlangchain_core.messages.human\xacHu"
    b"manMessage\x86\xa7content\xa0\xb1additional_kwargs\x80\xb1response_metadata\x80\xa4t"
    b"ype\xa5human\xa4name\xc0\xa2id\xc0\xb3model_validate_json"
)


def squeezed(kind: str, value: bytes) -> tuple[str, bytes]:
    """A serialized value as a checkpoint's row keeps it (``agentstate.backends.chains``):
    compressed on ``DICTIONARY`` (``SQUEEZED`` + its type) when that saves a tenth,
    else as it is. A small value compresses too: a message's fields are in the
    dictionary."""
    if len(value) >= SQUEEZE_FROM:
        # memLevel 4: a quarter of the default's state to set up for each value, the
        # same bytes out for values of a few kilobytes (a channel's, a write's)
        squeeze = zlib.compressobj(6, zlib.DEFLATED, -15, 4, zlib.Z_DEFAULT_STRATEGY, DICTIONARY)
        smaller = squeeze.compress(value) + squeeze.flush()
        if len(smaller) <= len(value) * 0.9:
            return SQUEEZED + kind, smaller
    return kind, value


def unpacked(kind: str, value: bytes) -> tuple[str, bytes]:
    """A stored value as its serializer wrote it: ``packed`` or ``squeezed`` undone."""
    if kind.startswith(COMPRESSED):
        return kind[len(COMPRESSED) :], zlib.decompress(value)
    if kind.startswith(SQUEEZED):
        unsqueeze = zlib.decompressobj(-15, DICTIONARY)
        return kind[len(SQUEEZED) :], unsqueeze.decompress(value) + unsqueeze.flush()
    return kind, value


@dataclass(frozen=True)
class Changed(Generic[T]):
    """An operation's result and the events it appended (in its transaction);
    ``after``: where a sweep's next batch starts (``expire_pauses``,
    ``apply_deadlines``, ``purge_store_items``)."""

    value: T
    events: list[Event]
    after: Any = None


@dataclass(frozen=True)
class Page(Generic[T]):
    """A page of a listing: its rows, and how many rows the whole listing has
    (``0`` for an empty page, whose count a listing does not need)."""

    rows: list[T]
    total: int


@dataclass(frozen=True)
class BudgetState:
    """A budget as it stands: a run's (``kind`` ``"run"``) or a user's (``"user"``).

    ``caps``: each of ``Budget.COUNTERS``, ``None`` where uncapped (every one when
    no budget is set); ``used``: a run's usage, or what a user's runs added in the
    current period (``0`` once a period is over, before any add rolls it over);
    ``period``: ``""``, ``"day"`` or ``"month"``; ``resets_at``: when the current
    period ends (``None`` without one); ``budget``: the row, ``None`` when unset.
    """

    kind: str
    caps: dict[str, int | None]
    used: dict[str, int]
    period: str = ""
    resets_at: datetime | None = None
    budget: Budget | None = None

    @property
    def remaining(self) -> dict[str, int | None]:
        """Per counter, what is left under its cap (never below 0), ``None`` if uncapped."""
        return {
            name: None if cap is None else max(cap - self.used[name], 0)
            for name, cap in self.caps.items()
        }


class Backend(abc.ABC):
    """One database's implementation of every operation.

    ``alias`` names the database connection (``settings.DATABASES``). Every
    method is atomic on its own; inside a caller's transaction it joins it
    (and a refusal leaves nothing of it written).
    """

    def __init__(self, alias: str) -> None:
        self.alias = alias

    # Context variables (docs: concepts/context). ``owner``: the scope's
    # owner, by id or by username (resolved in the operation; an unknown one
    # is ``UnknownOwner``); ``None``: the site's namespace. ``actor``: stored
    # as the variable's ``updated_by``.

    @abc.abstractmethod
    def put(
        self,
        scope: str,
        name: str,
        value: Any,
        if_version: int | None,
        owner: Owner,
        actor: str,
    ) -> int:
        """Store ``value`` (a list as elements); creates the scope and the variable as
        needed. ``if_version`` (0: must not exist) else ``VersionMismatch``.
        Returns the new version."""

    @abc.abstractmethod
    def get(self, scope: str, names: list[str] | None, owner: Owner) -> dict[str, Any]:
        """The stored values of ``names`` (every variable when ``None``), lists
        whole and in order, absent names left out; ``ScopeNotFound``."""

    @abc.abstractmethod
    def push(self, scope: str, name: str, value: Any, owner: Owner, actor: str) -> tuple[int, int]:
        """Append ``value``: absent becomes ``[value]``, a string ``s`` becomes
        ``[s, value]``, anything else but a list is ``TypeConflict``. Creates the
        scope as needed. Returns ``(length, version)``."""

    @abc.abstractmethod
    def extend(
        self, scope: str, name: str, values: list[Any], owner: Owner, actor: str
    ) -> tuple[int, int]:
        """Append every one of ``values`` (not empty), in order, each one element, as
        ``push`` appends one: in one step, so no other writer's element lands between
        them. Returns ``(length, version)``; the version grows by one."""

    @abc.abstractmethod
    def get_list(
        self, scope: str, name: str, last: int | None, owner: Owner
    ) -> tuple[list[Any], int]:
        """A list's last ``last`` elements (all when ``None``) in order, read from the
        list's tail whatever its length, and its whole length; a string reads as a
        one-element list. ``ScopeNotFound``, ``VariableNotFound``, ``TypeConflict``
        (operation ``get_list``)."""

    @abc.abstractmethod
    def pop(self, scope: str, name: str, lifo: bool, owner: Owner, actor: str) -> Any:
        """Remove and return a string, or a list's last (``lifo``) or first element;
        an emptied list removes the variable, a list left with one string collapses
        to it. ``ScopeNotFound``, ``VariableNotFound``, ``TypeConflict``."""

    @abc.abstractmethod
    def delete(self, scope: str, name: str, owner: Owner) -> None:
        """Remove a variable: ``ScopeNotFound``, ``VariableNotFound``."""

    @abc.abstractmethod
    def delete_scope(self, scope: str, owner: Owner) -> None:
        """Remove a scope and its variables: ``ScopeNotFound``."""

    # Paused runs (docs: concepts/pauses). Times are the database clock's.

    @abc.abstractmethod
    def put_pause(
        self,
        chat_id: str,
        tool_call_id: str,
        owner: str,
        payload: Any,
        ttl: timedelta,
        question_id: uuid.UUID,
        reach: Reach | None,
        by: Actor,
    ) -> Changed[PausedRun]:
        """Keep the call's pause pending under ``question_id``, expiring ``ttl`` from
        now, replacing an earlier one whatever its status (one outside ``reach``:
        ``PauseNotFound``, nothing changed). Created by ``by.user_id``. Event
        ``pause.created`` (details: question_id, expires_at, replaced: the earlier
        status). Value: the ``PausedRun``."""

    @abc.abstractmethod
    def claim(
        self, chat_id: str, tool_call_id: str, owner: str, question_id: str, by: Actor
    ) -> Changed[PausedRun]:
        """Claim ``owner``'s pending pause waiting on ``question_id`` (a UUID's canonical
        text; ``""`` names no question), exactly once; ``claimed_by`` is ``by.name``. Refusals, the first that applies:
        ``PauseNotFound`` (another owner's too), ``QuestionSuperseded``,
        ``AlreadyClaimed``, ``AlreadyResolved``, ``PauseExpired``. Event
        ``pause.claimed``. Value: the ``PausedRun``."""

    @abc.abstractmethod
    def resolve(
        self, chat_id: str, tool_call_id: str, reach: Reach | None, by: Actor
    ) -> Changed[PausedRun]:
        """A claimed pause becomes resolved; any other status ``NotClaimed``; outside
        ``reach`` ``PauseNotFound``. Event ``pause.resolved``. Value: the
        ``PausedRun``."""

    @abc.abstractmethod
    def cancel(
        self, chat_id: str, tool_call_id: str, reach: Reach | None, by: Actor
    ) -> Changed[PausedRun]:
        """Remove a pending, unexpired pause; any other ``NotPending``. Event
        ``pause.cancelled``. Value: the ``PausedRun`` as it was."""

    @abc.abstractmethod
    def pauses_page(
        self, filters: PauseFilters, reach: Reach | None, offset: int, limit: int
    ) -> Page[PausedRun]:
        """The pauses matching ``filters`` (``owner``, ``chat_id``, ``tool_call_id``:
        equal; ``status``: the current status) within ``reach`` (those its user
        created or its username owns; ``None``: all), newest first (``created_at``,
        then id, descending), ``limit`` of them from ``offset``, each with its
        ``current_status`` (pending past its expiry: ``expired``, by the database
        clock), and how many match."""

    # Runs, usage and approvals (docs: concepts/runs). ``run_id`` names the
    # run; one outside ``reach`` (``Reach.user_id``: its creator) is
    # ``RunNotFound``. A run returned carries its approval records map as
    # ``approvals`` (the Agents SDK's form), read in the same operation. Every
    # change of a run's records or requests locks the run's row first, so
    # they queue in one order and none deadlocks another. Times are the
    # database clock's.

    @abc.abstractmethod
    def create_run(self, run_id: str, context: Any, created_by_id: int | None) -> Run:
        """A new run (``approvals`` empty); ``RunExists`` when the id is taken, also
        when a concurrent creator takes it first."""

    @abc.abstractmethod
    def run(self, run_id: str, reach: Reach | None) -> Run:
        """The run, with ``approvals``."""

    @abc.abstractmethod
    def update_run(self, run_id: str, context: Any, reach: Reach | None) -> Run:
        """Replace the run's context; the run, with ``approvals``."""

    @abc.abstractmethod
    def add_usage(
        self, run_id: str, increments: dict[str, int], reach: Reach | None
    ) -> dict[str, int]:
        """Add ``increments`` (every usage counter) in one atomic step, with every
        budget that covers the run: the run's own, then its creator's (that row
        locked after the run's, its period rolled over first when it is over). A
        total past 2**63 - 1 (the run's, or the user budget's) is ``UsageOverflow``
        naming the first such counter; a capped counter whose used plus increment
        would pass its cap is ``BudgetExceeded`` (facts: budget ``"run"`` or
        ``"user"``, counter, increment, cap, used), the run's budget checked first,
        counters in ``Budget.COUNTERS`` order. Refused, nothing is added anywhere.
        Returns the run's totals."""

    # Budgets (docs: concepts/budgets). ``caps`` maps some of ``Budget.COUNTERS``
    # to a cap or ``None`` (no cap); the counters it leaves out are unchanged.
    # Setting a run's budget locks the run's row first, like every change of the
    # run; a user's budget is named by username (unknown: ``UserNotFound``).

    @abc.abstractmethod
    def run_budget(self, run_id: str, reach: Reach | None) -> BudgetState:
        """The run's budget, its ``used`` the run's usage."""

    @abc.abstractmethod
    def set_run_budget(
        self, run_id: str, caps: dict[str, int | None], reach: Reach | None, by: Actor
    ) -> Changed[BudgetState]:
        """Create or change the run's budget. Event ``budget.set`` (details:
        caps, period ``None``, run_id) unless nothing changed."""

    @abc.abstractmethod
    def user_budget(self, username: str) -> BudgetState:
        """The user's budget, by the database clock (a period over reads as used 0)."""

    @abc.abstractmethod
    def set_user_budget(
        self, username: str, caps: dict[str, int | None], period: str | None, by: Actor
    ) -> Changed[BudgetState]:
        """Create or change the user's budget; ``period`` ``""``, ``"day"`` or
        ``"month"``, ``None`` unchanged. A new budget, or a new period, starts
        counting from 0 now. Event ``budget.set`` (details: caps, period,
        username) unless nothing changed."""

    @abc.abstractmethod
    def records(self, run_id: str, reach: Reach | None) -> Records:
        """The run's approval records in the Agents SDK's form."""

    @abc.abstractmethod
    def is_tool_approved(
        self,
        run_id: str,
        tool_name: str,
        call_id: str,
        arguments: Any,
        digest: str | None,
        reach: Reach | None,
    ) -> Verdict:
        """The SDK's precedence over the tool's record: ``True``, ``False`` or ``None``;
        left ``None`` by the records, the active policies that match the call decide
        (a reject policy over an approve one). ``arguments`` ``None``: not given, so
        only the policies without an arguments pattern apply. Approved, and
        ``digest`` given: approved only when the call's approved request has that
        ``arguments_digest``, else ``(False, "arguments_changed")``. The reason is
        ``None`` otherwise."""

    @abc.abstractmethod
    def record_decision(
        self,
        run_id: str,
        tool_name: str,
        call_id: str,
        approve: bool,
        always: bool,
        reason: str,
        reach: Reach | None,
        by: Actor,
    ) -> Changed[Run]:
        """Approve or reject one call (appended when that side is a list) or, with
        ``always``, every call; who, when and why kept per call. An approval of a tool
        under a rule: ``SelfApproval``, ``NotAReviewer`` or ``VotesRequired`` unless
        the rule lets ``by`` decide alone. Event ``approvals.changed``. Value: the
        run, with ``approvals``."""

    @abc.abstractmethod
    def rebuild_approvals(
        self, run_id: str, records: Records, reach: Reach | None, by: Actor
    ) -> Changed[Run]:
        """Replace every approval record of the run with ``records`` (checked); an
        approval they add of a tool under a rule is refused as ``record_decision``
        refuses it. Event ``approvals.rebuilt``. Value: the run, with ``approvals``."""

    @abc.abstractmethod
    def request_approval(
        self,
        run_id: str,
        tool_name: str,
        call_id: str,
        arguments: Any,
        approval_ttl: timedelta,
        reach: Reach | None,
        by: Actor,
    ) -> Changed[tuple[ApprovalRequest, bool]]:
        """The run's request for ``call_id``, filed now unless one exists (then
        returned as it is, no event). A new one is filed already decided when the
        run's records decide the call (``decided_by`` empty, reason
        ``records.DECIDED_BY_RECORDS``, ``always`` when a permanent flag decided) or,
        the records leaving it undecided, when an active policy matches it (as
        ``is_tool_approved``): then ``policy`` names it, the reason is the policy's
        (``policies.decided_reason``), and the run's record of the call is written as
        a decision would (no decider, actor ``policies.POLICY_ACTOR``). The deciding
        policy's row is locked (shared) until the request commits, so a policy being
        revoked decides the request before its revocation or not at all. Events
        ``approval.requested`` (details: status, policy) and, decided by a policy,
        ``approvals.changed``. Value: ``(ApprovalRequest, created)``, the request with
        its ``run`` and its ``current_status`` (pending past ``approval_ttl``:
        expired)."""

    @abc.abstractmethod
    def approval_request(
        self, request_id: int, approval_ttl: timedelta, reach: Reach | None
    ) -> ApprovalRequest | None:
        """The request with its ``run``, its ``decided_by`` and its ``current_status``
        (pending past ``approval_ttl``: expired); ``None`` when there is none or it is
        out of ``reach`` (the requests the reach's user filed; ``None``: all)."""

    @abc.abstractmethod
    def approval_requests_page(
        self,
        filters: RequestFilters,
        approval_ttl: timedelta,
        reach: Reach | None,
        offset: int,
        limit: int,
    ) -> Page[ApprovalRequest]:
        """The requests matching ``filters`` (``status``: the current status;
        ``tool_name``, ``run_id``: equal) within ``reach`` (those the reach's user
        filed; ``None``: all), oldest first (``created_at``, then id), ``limit`` of
        them from ``offset``, and how many match. Each with its ``current_status``
        (as ``approval_request``'s), its ``run`` (its ``run_id`` at least: the rest may
        be deferred, read when used), its ``decided_by`` (its username at least) and
        its votes in order, each with its ``by`` (``services.approvals.votes_of``)."""

    @abc.abstractmethod
    def decide(
        self,
        request_id: int,
        approve: bool,
        always: bool,
        reason: str,
        arguments: Any,
        approval_ttl: timedelta,
        by: Actor,
    ) -> Changed[ApprovalRequest]:
        """Decide a pending request exactly once and write the run's record as
        ``record_decision`` does. ``arguments`` (approving only; ``None``: none): what
        the reviewer approved instead of the filed arguments, kept as
        ``approved_arguments`` when it differs from them (an equal value is no edit).
        ``ApprovalRequestNotFound``; ``SelfApproval`` (the run's creator, unless the
        request allows it), ``NotAReviewer`` (outside its reviewers group, and its
        escalation group once due); ``ApprovalRequestExpired`` (pending for longer than
        ``approval_ttl``, or past its rule's deadline, swept or not);
        ``AlreadyDecided`` (facts: ``status``, ``decided_by_id``). Filed under a rule,
        the decision is a vote (``AlreadyVoted`` for a second one, event
        ``approval.voted`` first): an approve decides only once ``approvals_required``
        votes approved the same arguments (digest), else the request stays pending and
        the only event is the vote's. Events ``approvals.changed`` and ``approval.decided`` (with
        an edit, its details also hold ``arguments`` as filed and
        ``approved_arguments``). Value: the request, with its ``run`` and
        ``current_status``."""

    @abc.abstractmethod
    def consume(
        self, run_id: str, tool_name: str, call_id: str, digest: str, reach: Reach | None, by: Actor
    ) -> Changed[ApprovalRequest]:
        """Use the approval of a call once: its request approved with ``digest``
        gets ``consumed_at`` (now). ``NotApproved`` (no approved request of the call
        and tool), ``ArgumentsChanged`` (approved with another digest),
        ``AlreadyConsumed``. Event ``approval.consumed``. Value: the request."""

    # Approval rules (docs: oversight). A rule names groups by id.

    @abc.abstractmethod
    def create_rule(self, values: dict[str, Any], by: Actor) -> Changed[ApprovalRule]:
        """A new rule; ``RuleExists`` when its tool has one. Event ``rule.created``."""

    @abc.abstractmethod
    def change_rule(self, rule_id: int, values: dict[str, Any], by: Actor) -> Changed[ApprovalRule]:
        """Change the rule's ``values`` (requests filed before keep theirs);
        ``RuleNotFound``, ``RuleExists``. Event ``rule.changed`` (details: what changed)."""

    @abc.abstractmethod
    def delete_rule(self, rule_id: int, by: Actor) -> Changed[ApprovalRule]:
        """Delete the rule; ``RuleNotFound``. Event ``rule.deleted``."""

    # Approval policies (docs: concepts/policies). Times are the database clock's.

    @abc.abstractmethod
    def create_policy(
        self,
        tool_name: str,
        approve: bool,
        user: Owner,
        arguments: dict[str, Any] | None,
        expires_at: datetime | timedelta | None,
        reason: str,
        by: Actor,
    ) -> Changed[ApprovalPolicy]:
        """A new policy for the runs of ``user`` (an id, or a username looked up in the
        operation: ``UnknownOwner`` on field ``user``; ``None``: every user's), created
        by ``by.user_id``, who must have the right of the tool's rule to decide alone
        (as ``record_decision``; the policy's user is the run's creator), in force
        until ``expires_at`` (a time, or a ``timedelta`` from the database's now;
        ``PastExpiry`` unless it is after that now; ``None``: until revoked). Event
        ``policy.created``. Value: the policy, with ``user_name`` and
        ``created_by_name`` (usernames, or ``None``)."""

    @abc.abstractmethod
    def revoke_policy(self, policy_id: int, by: Actor) -> Changed[ApprovalPolicy]:
        """Revoke a policy from now on: its row is locked first, so that every request it
        is deciding commits before ``revoked_at`` is taken (then, by the clock, not
        the transaction's start), and no request after sees it active.
        ``PolicyNotFound``, ``AlreadyRevoked``. Event ``policy.revoked``. Value: the
        policy, with ``user_name`` and ``created_by_name``."""

    # LangGraph checkpoints (docs: langgraph): a thread's row is made or locked by
    # every put, its ``updated_at`` set to now when older than ``THREAD_TOUCH``;
    # ``checkpoint_ns`` names the (sub)graph.

    @abc.abstractmethod
    def put_checkpoint(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        checkpoint: dict[str, Any],
        metadata: dict[str, Any],
        values: bytes,
        base_id: str | None,
        refuse_fork: bool,
        writes: bytes | None = None,
        parent_writes: list[WriteCall] | None = None,
    ) -> Put:
        """Store a checkpoint with its channel values (``values``: records of
        ``agentstate.backends.chains`` on those of the checkpoint ``base_id`` of the
        namespace, ``None`` for a snapshot); the thread's puts queue on its row.
        ``writes``: task writes to it (``chains.encode_writes``'s bytes) that came
        before it, stored with it after its writes stored as rows.
        ``parent_writes``: calls' task writes to ``parent_id`` that came after the
        parent's put had begun, each stored as ``put_checkpoint_writes`` stores it,
        in the put's transaction (none when it writes nothing).
        Putting one already stored replaces it (its pending writes kept). A fork
        (``parent_id`` already has another child, or a second root of the
        namespace) is stored as ``forked``, or with ``refuse_fork`` refused as
        ``HistoryForked``, nothing written. A base no longer stored writes nothing
        and answers ``rebase``."""

    @abc.abstractmethod
    def put_checkpoint_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        writes: list[Write],
    ) -> None:
        """Store a task's pending writes (with its checkpoint's row, or as rows of
        their own when the checkpoint is not stored): one already stored at its
        ``idx`` is kept, except a special channel's (a negative ``idx``), which is
        replaced."""

    @abc.abstractmethod
    def checkpoint(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> StoredCheckpoint | None:
        """The checkpoint, or the namespace's latest (greatest id) when
        ``checkpoint_id`` is ``None``; ``None`` when there is none."""

    @abc.abstractmethod
    def checkpoint_history(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str | None,
        channels: list[str],
    ) -> list[StoredCheckpoint]:
        """The ancestors of a checkpoint (the namespace's latest when
        ``checkpoint_id`` is ``None``) up its parents, nearest first, until each of
        ``channels`` has a value in one, for a ``DeltaChannel``'s history: each
        with at least its values of the channels still wanted there and its
        pending writes to them."""

    @abc.abstractmethod
    def checkpoints(
        self,
        thread_id: str | None,
        checkpoint_ns: str | None,
        checkpoint_id: str | None,
        metadata: dict[str, Any] | None,
        before: str | None,
        limit: int | None,
    ) -> list[StoredCheckpoint]:
        """Checkpoints newest first: of a thread (``None``: every thread), a namespace
        (``None``: every one), one id, those whose metadata has every item of
        ``metadata``, those with an id below ``before``; at most ``limit``."""

    @abc.abstractmethod
    def delete_threads(self, thread_ids: list[str]) -> None:
        """Delete the threads with their checkpoints, values and writes."""

    @abc.abstractmethod
    def delete_checkpoint_runs(self, run_ids: list[str]) -> None:
        """Delete the checkpoints of these runs (metadata ``run_id``) and their writes."""

    @abc.abstractmethod
    def copy_thread(self, source: str, target: str) -> None:
        """Copy every checkpoint, value and write of ``source`` into ``target``."""

    @abc.abstractmethod
    def prune_threads(self, thread_ids: list[str], keep_latest: bool) -> None:
        """Delete the threads' checkpoints (with ``keep_latest``: all but each
        namespace's latest) with their writes, and the values no kept checkpoint
        uses."""

    # LangGraph's store (docs: langgraph): an item is a variable of one of the
    # site's scopes (no owner) keyed ``STORE_PREFIX``..., its value ``{"value",
    # "created_at", "updated_at"}`` and, with a TTL, ``"ttl"`` (minutes) and
    # ``"expires_at"`` (epoch seconds). Its times are the database's clock (now:
    # the operation's); ``actor``: stored as the variable's ``updated_by``.

    @abc.abstractmethod
    def store_get(
        self, items: list[tuple[str, str, bool]], actor: str
    ) -> list[dict[str, Any] | None]:
        """The stored values of ``items`` (``(scope, name, refresh)``), in that order;
        ``None`` for one absent or expired (``expires_at`` at most now). One asked
        with ``refresh`` that has a TTL gets its ``expires_at`` pushed to now plus its
        TTL in the same operation, its row locked: a write that got there first
        stands, and is what is refreshed and returned."""

    @abc.abstractmethod
    def store_put(self, scope: str, name: str, value: dict[str, Any], actor: str) -> None:
        """Store an item, ``value`` its ``{"value"}`` and, with a TTL, ``"ttl"``
        (minutes, a number): written with ``created_at`` and ``updated_at`` now (as
        event details hold a time: ``events.json_time``) and, with a TTL,
        ``expires_at`` now plus the TTL, keeping the ``created_at`` of the item
        already stored there (expired and not swept yet too); creates the scope as
        needed; a list stored there is replaced."""

    # The sweep (docs: concepts/expiry): each call is one batch of at most
    # ``size`` rows, locked without waiting (two sweeps take disjoint batches).

    @abc.abstractmethod
    def expire_pauses(self, size: int, after: Any = None, answer: bool = True) -> Changed[int]:
        """Mark pending pauses past their expiry expired, by expiry then id, the batch
        after the one that answered ``after`` (``Changed.after``; ``None``: from the
        first), so that each batch reads only its own rows however many came before.
        Event ``pause.expired`` per pause, answered only with ``answer`` (whoever
        listens to their signals; the log has them either way). Value: how many."""

    @abc.abstractmethod
    def expire_approval_requests(self, size: int, approval_ttl: timedelta) -> Changed[int]:
        """Mark pending requests older than ``approval_ttl`` (filed under no rule: no
        ``deadline``) expired. Event
        ``approval.expired`` per request. Value: how many."""

    @abc.abstractmethod
    def apply_deadlines(self, size: int, after: Any = None) -> Changed[int]:
        """The requests filed under a rule, each once: pending past their deadline,
        ``on_deadline`` applied (``expire``: expired, event ``approval.expired``;
        ``reject`` / ``approve``: decided with no decider, the run's record written,
        events by actor ``rule:ID``), each under its run's and its own row locks, so a
        decision racing the deadline is either before it or refused; past
        ``remind_at`` not reminded yet: event ``approval.expiring``; past
        ``escalate_at`` not escalated yet: event ``approval.escalated``. Value: how
        many requests were due (a batch of ``size``: maybe more are). By deadline,
        from after ``after`` (``None``: the first), which the last batch answered in
        ``Changed.after``: a request reminded or escalated stays pending, and is not
        read again by the batches after it."""

    @abc.abstractmethod
    def purge_pauses(self, size: int, retention: timedelta) -> int:
        """Delete resolved and expired pauses last changed more than ``retention``
        ago; how many."""

    @abc.abstractmethod
    def purge_threads(self, size: int, ttl: timedelta) -> int:
        """Delete LangGraph threads last put more than ``ttl`` ago (``updated_at``
        older than ``ttl`` plus ``THREAD_TOUCH``), with their checkpoints, values
        and writes; how many threads."""

    @abc.abstractmethod
    def purge_store_items(self, size: int, after: Any = None) -> Changed[int]:
        """Delete the LangGraph store's items (the variables of the site's scopes keyed
        ``STORE_PREFIX``...) whose ``expires_at`` (epoch seconds, in the value) is at
        most now, by scope then name, the batch after the one that answered
        ``after`` (``Changed.after``; ``None``: from the first): the expiry is in each
        item's value, with no index, so a sweep reads each item once only by going on
        where the last batch ended. Value: how many."""

    @abc.abstractmethod
    def purge_events(self, size: int, retention: timedelta) -> int:
        """Delete events created more than ``retention`` ago, with their webhook
        deliveries and the deliveries' attempts; how many events."""

    # The audit trail (docs: events)

    @abc.abstractmethod
    def events_page(
        self, filters: EventFilters, reach: Reach | None, offset: int, limit: int
    ) -> Page[Event]:
        """The events matching ``filters`` (``kind``, ``object_type``, ``object_id``:
        equal; ``run_id``: the run's and its approval requests' events) within
        ``reach`` (``Reach.user_id``: those about objects its user created; its
        ``username``: owns; and every event about an object of its ``object_types``;
        ``None``: all), newest first (``created_at``, then id, descending), ``limit``
        of them from ``offset``, and how many match. Each with its ``user`` and
        ``created_by`` (their username at least: the rest may be deferred)."""

    # Authentication (the REST API's tokens: ``agentstate.api.authentication``)

    @abc.abstractmethod
    def token(self, token_model: type[Model], key: str) -> Any:
        """The token of ``token_model`` (DRF's ``Token``, or a site's like it) whose key
        is ``key``, with its ``user`` read too, or ``None``. The API checks that the
        user is active; a backend may fill the user's permission caches."""
