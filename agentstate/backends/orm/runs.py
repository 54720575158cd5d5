"""Runs, usage and approvals on the ORM: a transaction per operation, the run's row first.

Every change of a run locks its row (``SELECT ... FOR UPDATE``; SQLite's
IMMEDIATE transactions serialize writers instead) before it reads or writes
anything else of the run: usage, budgets, approval records, requests. So approve,
reject, rebuild, request_approval and decide queue on that one row in one
order, a request is filed under the records as they are, and the record or
request a writer creates cannot be created by another meanwhile.
"""

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, cast

from django.db import IntegrityError, transaction
from django.db.models.functions import Now

from agentstate.backends import events
from agentstate.backends.base import Changed, Page, RequestFilters
from agentstate.db import window_page
from agentstate.exceptions import (
    AlreadyDecided,
    AlreadyVoted,
    ApprovalRequestExpired,
    ApprovalRequestNotFound,
    NotAReviewer,
    RunExists,
    RunNotFound,
    UsageOverflow,
    VotesRequired,
)
from agentstate.models import (
    ApprovalCall,
    ApprovalRecord,
    ApprovalRequest,
    Budget,
    Event,
    Run,
    Vote,
)
from agentstate.models.querysets import request_in_status
from agentstate.policies import POLICY_ACTOR, decided_reason, json_equal
from agentstate.records import (
    APPROVE,
    DECIDED_BY_RECORDS,
    RECORDS_ACTOR,
    REJECT,
    SIDES,
    decide_from,
    decided_always,
    record_json,
)
from agentstate.types import ARGUMENTS_CHANGED, Actor, Reach, Records, Verdict, arguments_digest

from .budgets import COUNTERS, refuse_past_caps, roll_over, with_period_bounds
from .oversight import request_event
from .policies import PolicyOperations

# The largest total a usage column holds (a 64-bit integer).
MAX_TOTAL = 2**63 - 1
Status = ApprovalRequest.Status


class RunOperations(PolicyOperations):
    def _run(self, run_id: str, reach: Reach | None, *, lock: bool = False) -> Run:
        runs = self.rows(Run).filter(run_id=run_id)
        if reach is not None:
            runs = runs.created_by_user(reach.user_id)
        if lock:
            runs = runs.select_for_update()
        run = runs.first()
        if run is None:
            raise RunNotFound.of(run_id=run_id)
        return run

    def _records(self, run: Run, tool_name: str | None = None) -> Records:
        """The run's records map (only ``tool_name``'s, given one): one query."""
        records = self.rows(ApprovalRecord).filter(run=run)
        if tool_name is not None:
            records = records.filter(tool_name=tool_name)
        rows = records.order_by("tool_name", "calls__pk").values_list(
            "tool_name", "approved_always", "rejected_always", "calls__decision", "calls__call_id"
        )
        found: dict[str, tuple[ApprovalRecord, list[tuple[str, str]]]] = {}
        for tool, approved_always, rejected_always, decision, call_id in rows:
            flags = ApprovalRecord(approved_always=approved_always, rejected_always=rejected_always)
            _, calls = found.setdefault(tool, (flags, []))
            if call_id is not None:
                calls.append((decision, call_id))
        return {tool: record_json(flags, calls) for tool, (flags, calls) in found.items()}

    def _with_records(self, run: Run) -> Run:
        run.approvals = self._records(run)
        return run

    def create_run(self, run_id: str, context: Any, created_by_id: int | None) -> Run:
        return self.atomic(self._create_run, run_id, context, created_by_id)

    def _create_run(self, run_id: str, context: Any, created_by_id: int | None) -> Run:
        # The id's absence is checked in the transaction that inserts, which
        # SQLite's IMMEDIATE mode serializes against every other writer. Elsewhere
        # a concurrent creator can insert the id between the check and the
        # insert: the insert, in a savepoint, then fails on the id's unique key,
        # and the run there (now committed) is the existing run.
        if self.rows(Run).filter(run_id=run_id).exists():
            raise RunExists.of(run_id=run_id)
        try:
            with transaction.atomic(using=self.alias):
                run = self.rows(Run).create(
                    run_id=run_id, context=context, created_by_id=created_by_id
                )
        except IntegrityError:
            if self.rows(Run).filter(run_id=run_id).exists():
                raise RunExists.of(run_id=run_id) from None
            raise
        run.approvals = {}
        return run

    def run(self, run_id: str, reach: Reach | None) -> Run:
        return self.atomic(lambda: self._with_records(self._run(run_id, reach)))

    def update_run(self, run_id: str, context: Any, reach: Reach | None) -> Run:
        return self.atomic(self._update_run, run_id, context, reach)

    def _update_run(self, run_id: str, context: Any, reach: Reach | None) -> Run:
        run = self._run(run_id, reach, lock=True)
        run.context = context
        run.save(using=self.alias, update_fields=["context", "updated_at"])
        return self._with_records(run)

    def add_usage(
        self, run_id: str, increments: dict[str, int], reach: Reach | None
    ) -> dict[str, int]:
        return self.atomic(self._add_usage, run_id, increments, reach)

    def _add_usage(
        self, run_id: str, increments: dict[str, int], reach: Reach | None
    ) -> dict[str, int]:
        run = self._run(run_id, reach, lock=True)
        for name, value in increments.items():
            if getattr(run, name) > MAX_TOTAL - value:
                raise UsageOverflow.of(field=name)
        # The run's budget caps the run's own totals; its row is changed only under
        # the run's lock, which is held.
        own = self.rows(Budget).filter(run=run).first()
        if own is not None:
            refuse_past_caps("run", own.caps, {n: getattr(run, n) for n in COUNTERS}, increments)
        # The creator's budget: its row locked after the run's.
        shared = None
        if run.created_by_id is not None:
            budgets = self.rows(Budget).select_for_update().filter(user_id=run.created_by_id)
            shared = with_period_bounds(budgets).first()
        if shared is not None:
            roll_over(shared)
            for name in COUNTERS:
                if getattr(shared, f"used_{name}") > MAX_TOTAL - increments[name]:
                    raise UsageOverflow.of(field=name)
            refuse_past_caps("user", shared.caps, shared.used, increments)
            for name in COUNTERS:
                setattr(shared, f"used_{name}", getattr(shared, f"used_{name}") + increments[name])
            shared.save(
                using=self.alias,
                update_fields=[*(f"used_{n}" for n in COUNTERS), "period_start", "updated_at"],
            )
        for name, value in increments.items():
            setattr(run, name, getattr(run, name) + value)
        run.save(using=self.alias, update_fields=[*increments, "updated_at"])
        return {name: getattr(run, name) for name in increments}

    def records(self, run_id: str, reach: Reach | None) -> Records:
        return self.atomic(lambda: self._records(self._run(run_id, reach)))

    def approval_request(
        self, request_id: int, approval_ttl: timedelta, reach: Reach | None
    ) -> ApprovalRequest | None:
        requests = ApprovalRequest.objects.using(self.alias).select_related("run", "decided_by")
        if reach is not None:
            requests = requests.filter(created_by_id=reach.user_id)
        return requests.with_current_status(approval_ttl).filter(pk=request_id).first()

    def approval_requests_page(
        self,
        filters: RequestFilters,
        approval_ttl: timedelta,
        reach: Reach | None,
        offset: int,
        limit: int,
    ) -> Page[ApprovalRequest]:
        requests = (
            self.rows(ApprovalRequest)
            .select_related("run", "decided_by")
            .with_current_status(approval_ttl)
            .prefetch_related("votes__by")
        )
        if reach is not None:  # as ``approval_request`` has it
            requests = requests.filter(created_by_id=reach.user_id)
        if "status" in filters:
            requests = requests.filter(request_in_status(filters["status"], approval_ttl))
        if "tool_name" in filters:
            requests = requests.filter(tool_name=filters["tool_name"])
        if "run_id" in filters:
            requests = requests.filter(run__run_id=filters["run_id"])
        rows, total = window_page(requests.order_by("created_at", "pk"), offset, limit)
        return Page(rows, total)

    def is_tool_approved(
        self,
        run_id: str,
        tool_name: str,
        call_id: str,
        arguments: Any,
        digest: str | None,
        reach: Reach | None,
    ) -> Verdict:
        return self.atomic(
            self._is_tool_approved, run_id, tool_name, call_id, arguments, digest, reach
        )

    def _is_tool_approved(
        self,
        run_id: str,
        tool_name: str,
        call_id: str,
        arguments: Any,
        digest: str | None,
        reach: Reach | None,
    ) -> Verdict:
        run = self._run(run_id, reach)
        decided = decide_from(self._records(run, tool_name).get(tool_name), call_id)
        if decided is None:
            policy = self._deciding_policy(run, tool_name, arguments, lock=False)
            decided = None if policy is None else policy.decision == APPROVE
        if decided and digest is not None:
            changed = (
                self.rows(ApprovalRequest)
                .filter(run=run, call_id=call_id, status=Status.APPROVED)
                .exclude(arguments_digest="")
                .exclude(arguments_digest=digest)
            )
            if changed.exists():
                return False, ARGUMENTS_CHANGED
        return decided, None

    def _deadline_decision(
        self, run: Run, tool_name: str, call_id: str, approve: bool, reason: str, by: Actor
    ) -> Event:
        event = self._write_decision(run, tool_name, call_id, approve, False, reason, by)
        return events.save(self.alias, [event])[0]

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
        return self.atomic(
            self._record_decision, run_id, tool_name, call_id, approve, always, reason, reach, by
        )

    def _record_decision(
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
        run = self._run(run_id, reach, lock=True)
        if approve:
            self._check_standing(tool_name, True, by.user_id, run.created_by_id)
        event = self._write_decision(run, tool_name, call_id, approve, always, reason, by)
        events.save(self.alias, [event])
        return Changed(self._with_records(run), [event])

    def _write_decision(
        self,
        run: Run,
        tool_name: str,
        call_id: str,
        approve: bool,
        always: bool,
        reason: str,
        by: Actor,
    ) -> Event:
        """Write the decision into the tool's record (the run's row locked by the
        caller); returns its ``approvals.changed`` event, to save."""
        decision = APPROVE if approve else REJECT
        record = self.rows(ApprovalRecord).filter(run=run, tool_name=tool_name).first()
        if record is None:  # the SDK's list form
            record = ApprovalRecord(run=run, tool_name=tool_name)
        record.updated_by_id = by.user_id
        if always:
            # approve always: {"approved": true, "rejected": []};
            # reject always:  {"approved": false, "rejected": true}.
            record.approved_always, record.rejected_always = (
                (True, None) if approve else (False, True)
            )
        record.save(using=self.alias)
        if always:
            self.rows(ApprovalCall).filter(record=record).delete()
        elif (record.approved_always if approve else record.rejected_always) is None:
            # A permanent decision either way is not overridden per call.
            self.rows(ApprovalCall).bulk_create(
                [
                    ApprovalCall(
                        record=record,
                        call_id=call_id,
                        decision=decision,
                        decided_by_id=by.user_id,
                        reason=reason,
                    )
                ],
                ignore_conflicts=True,  # decided so before: kept once
            )
        return events.new(
            "approvals.changed",
            Run,
            run.run_id,
            by,
            created_by_id=run.created_by_id,
            details={
                "tool_name": tool_name,
                "call_id": call_id,
                "decision": decision,
                "always": always,
                "reason": reason,
            },
        )

    def rebuild_approvals(
        self, run_id: str, records: Records, reach: Reach | None, by: Actor
    ) -> Changed[Run]:
        return self.atomic(self._rebuild_approvals, run_id, records, reach, by)

    def _rebuild_approvals(
        self, run_id: str, records: Records, reach: Reach | None, by: Actor
    ) -> Changed[Run]:
        run = self._run(run_id, reach, lock=True)
        held = self._records(run)
        for tool_name in sorted(records):
            if _adds_approvals(records[tool_name], held.get(tool_name)):
                self._check_standing(tool_name, True, by.user_id, run.created_by_id)
        self.rows(ApprovalRecord).filter(run=run).delete()
        self.rows(ApprovalRecord).bulk_create(
            ApprovalRecord(
                run=run,
                tool_name=tool_name,
                approved_always=_flag(sides["approved"]),
                rejected_always=_flag(sides["rejected"]),
                updated_by_id=by.user_id,
            )
            for tool_name, sides in records.items()
        )
        by_tool = dict(self.rows(ApprovalRecord).filter(run=run).values_list("tool_name", "pk"))
        self.rows(ApprovalCall).bulk_create(
            ApprovalCall(
                record_id=by_tool[tool_name],
                call_id=call_id,
                decision=SIDES[side],
                decided_by_id=by.user_id,
            )
            for tool_name, sides in records.items()
            for side in SIDES
            if isinstance(sides[side], list)
            for call_id in cast(list[str], sides[side])
        )
        event = events.new(
            "approvals.rebuilt",
            Run,
            run.run_id,
            by,
            created_by_id=run.created_by_id,
            details={"tools": len(records)},
        )
        events.save(self.alias, [event])
        return Changed(self._with_records(run), [event])

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
        return self.atomic(
            self._request_approval, run_id, tool_name, call_id, arguments, approval_ttl, reach, by
        )

    def _request_approval(
        self,
        run_id: str,
        tool_name: str,
        call_id: str,
        arguments: Any,
        approval_ttl: timedelta,
        reach: Reach | None,
        by: Actor,
    ) -> Changed[tuple[ApprovalRequest, bool]]:
        run = self._run(run_id, reach, lock=True)
        requests = self.rows(ApprovalRequest).with_current_status(approval_ttl)
        existing = requests.filter(run=run, call_id=call_id).first()
        if existing is not None:
            existing.run = run
            return Changed((existing, False), [])
        request = ApprovalRequest(
            run=run,
            tool_name=tool_name,
            call_id=call_id,
            arguments=arguments,
            created_by_id=by.user_id,
            arguments_digest=arguments_digest(arguments),
        )
        self._stamp_rule(request, approval_ttl)
        record = self._records(run, tool_name).get(tool_name)
        decided = decide_from(record, call_id)
        policy = None
        if decided is not None:
            request.status = Status.APPROVED if decided else Status.REJECTED
            request.always = decided_always(cast(Mapping[str, bool | list[str]], record))
            request.decided_at = Now()
            request.reason = DECIDED_BY_RECORDS
        else:
            policy = self._deciding_policy(run, tool_name, arguments, lock=True)
        if policy is not None:
            decided = policy.decision == APPROVE
            request.status = Status.APPROVED if decided else Status.REJECTED
            request.decided_at = Now()
            request.reason = decided_reason(policy.pk, policy.reason)
            request.policy = policy
        request.save(using=self.alias)
        request = requests.get(pk=request.pk)  # the database's times and current status
        request.run = run
        event = events.new(
            "approval.requested",
            ApprovalRequest,
            str(request.pk),
            by,
            created_by_id=request.created_by_id,
            details={
                "run_id": run.run_id,
                "tool_name": tool_name,
                "call_id": call_id,
                "status": request.status,
                "policy": request.policy_id,
                "arguments": arguments,
                "arguments_digest": request.arguments_digest,
                **(
                    {
                        "rule": request.rule_id,
                        "approvals_required": request.approvals_required,
                        "deadline": events.json_time(request.deadline),
                    }
                    if request.rule_id is not None and request.deadline is not None
                    else {}
                ),
            },
        )
        saved = [event]
        if decided is not None:
            # Decided as it is filed: by an active policy or by the run's records, no decider.
            saved.append(
                events.new(
                    "approval.decided",
                    ApprovalRequest,
                    str(request.pk),
                    Actor(None, RECORDS_ACTOR if policy is None else POLICY_ACTOR % policy.pk),
                    created_by_id=request.created_by_id,
                    details={
                        "run_id": run.run_id,
                        "tool_name": tool_name,
                        "call_id": call_id,
                        "decision": APPROVE if decided else REJECT,
                        "always": request.always,
                        "reason": request.reason,
                        "policy": request.policy_id,
                    },
                )
            )
        if policy is not None:
            # The run's record of the call, as a decision writes it: no decider.
            saved.append(
                self._write_decision(
                    run,
                    tool_name,
                    call_id,
                    bool(decided),
                    False,
                    request.reason,
                    Actor(None, POLICY_ACTOR % policy.pk),
                )
            )
        events.save(self.alias, saved)
        return Changed((request, True), saved)

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
        return self.atomic(
            self._decide, request_id, approve, always, reason, arguments, approval_ttl, by
        )

    def _decide(
        self,
        request_id: int,
        approve: bool,
        always: bool,
        reason: str,
        arguments: Any,
        approval_ttl: timedelta,
        by: Actor,
    ) -> Changed[ApprovalRequest]:
        requests = self.rows(ApprovalRequest)
        run_pk = requests.filter(pk=request_id).values_list("run_id", flat=True).first()
        # The run's row first, like every change of its records; then the request's.
        run = (
            None if run_pk is None else self.rows(Run).select_for_update().filter(pk=run_pk).first()
        )
        locked = (
            requests.select_for_update()
            .with_current_status(approval_ttl)
            .annotate(now=Now())  # the database's clock, for the deadline and escalation
            .filter(pk=request_id)
            .first()
        )
        if run is None or locked is None:
            raise ApprovalRequestNotFound.of(id=request_id)
        now = locked.now
        by_escalation = self._check_may_decide(run, locked, by.user_id, now)
        past_deadline = locked.deadline is not None and locked.deadline <= now
        # current_status: annotated by with_current_status, which django-stubs cannot follow.
        if past_deadline or locked.current_status == Status.EXPIRED:  # type: ignore[attr-defined]
            raise ApprovalRequestExpired.of()
        if locked.status != Status.PENDING:
            raise AlreadyDecided.of(status=locked.status, decided_by_id=locked.decided_by_id)
        if approve and always and locked.approvals_required > 1:
            # "Always" would approve the tool's later calls on one vote.
            raise VotesRequired.of(
                tool_name=locked.tool_name, approvals_required=locked.approvals_required
            )
        if approve and always and by_escalation:
            # Escalation lets its group decide this request, not the tool's later calls.
            raise NotAReviewer.of(tool_name=locked.tool_name, escalated=True)
        edited = arguments is not None and not json_equal(arguments, locked.arguments)
        digest = locked.arguments_digest if arguments is None else arguments_digest(arguments)
        saved: list[Event] = []
        if locked.rule_id is not None:
            voted, approvals = self._vote(
                run, locked, approve, arguments if edited else None, digest, reason, by
            )
            saved.append(voted)
            if approve and approvals < locked.approvals_required:
                events.save(self.alias, saved)
                locked.run = run
                return Changed(locked, saved)
        changed = self._write_decision(
            run, locked.tool_name, locked.call_id, approve, always, reason, by
        )
        locked.status = Status.APPROVED if approve else Status.REJECTED
        locked.always, locked.decided_by_id, locked.reason = always, by.user_id, reason
        locked.decided_at = Now()
        locked.approved_arguments = arguments if edited else None
        if approve:
            locked.arguments_digest = digest
        locked.save(
            using=self.alias,
            update_fields=[
                "status",
                "always",
                "decided_by",
                "reason",
                "decided_at",
                "approved_arguments",
                "arguments_digest",
            ],
        )
        locked.refresh_from_db(using=self.alias, fields=["decided_at"])
        locked.current_status = str(locked.status)  # type: ignore[attr-defined]
        locked.run = run
        decided = events.new(
            "approval.decided",
            ApprovalRequest,
            str(locked.pk),
            by,
            created_by_id=locked.created_by_id,
            details={
                "run_id": run.run_id,
                "tool_name": locked.tool_name,
                "call_id": locked.call_id,
                "decision": APPROVE if approve else REJECT,
                "always": always,
                "reason": reason,
                **(
                    {"arguments": locked.arguments, "approved_arguments": arguments}
                    if edited
                    else {}
                ),
                **(
                    {"arguments_digest": locked.arguments_digest}
                    if locked.rule_id is not None
                    else {}
                ),
            },
        )
        saved += [changed, decided]
        events.save(self.alias, saved)
        return Changed(locked, saved)

    def _vote(
        self,
        run: Run,
        request: ApprovalRequest,
        approve: bool,
        edited: Any,
        digest: str,
        reason: str,
        by: Actor,
    ) -> tuple[Event, int]:
        """Record a reviewer's vote (``AlreadyVoted`` for a second); its event, unsaved,
        and how many votes now approve ``digest``."""
        votes = self.rows(Vote).filter(request=request)
        if by.user_id is not None and votes.filter(by_id=by.user_id).exists():
            raise AlreadyVoted.of(id=request.pk)
        decision = APPROVE if approve else REJECT
        self.rows(Vote).create(
            request=request,
            by_id=by.user_id,
            decision=decision,
            arguments=request.arguments if edited is None else edited,
            arguments_digest=digest,
            reason=reason,
        )
        approvals = votes.filter(decision=APPROVE, arguments_digest=digest).count()
        event = request_event(
            "approval.voted",
            request,
            run,
            by,
            decision=decision,
            arguments_digest=digest,
            reason=reason,
            approvals=approvals,
            approvals_required=request.approvals_required,
        )
        return event, approvals


def _adds_approvals(
    rebuilt: Mapping[str, bool | list[str]], held: Mapping[str, bool | list[str]] | None
) -> bool:
    """Whether a tool's rebuilt record approves what its record held does not: for
    good where it was not approved for good, or a call it did not approve."""
    approved = rebuilt["approved"]
    if approved is True:
        return held is None or held.get("approved") is not True
    if isinstance(approved, list):
        # Whether a call is approved depends only on whether the held record lists it
        # as approved: one call of each kind is asked (each asked alone searched the
        # held list for it, in time growing with the product of the two).
        side = held.get("approved") if held is not None else None
        listed = set(side) if isinstance(side, list) else set()
        one_of_each = {call_id in listed: call_id for call_id in approved}.values()
        return any(decide_from(held, call_id) is not True for call_id in one_of_each)
    return False


def _flag(side: bool | list[str]) -> bool | None:
    """A side's permanent flag; ``None`` for the list form."""
    return side if isinstance(side, bool) else None
