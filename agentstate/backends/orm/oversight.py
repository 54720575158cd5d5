"""Oversight on the ORM: approval rules, separation of duties, votes, the use of an
approval, and the deadlines' sweep.

The PostgreSQL backend takes the rules, ``consume`` and ``apply_deadlines`` from
here too (one transaction each, the run's row locked before the request's, as
every change of a run's requests); filing, deciding and checking are its
functions' (``sql/30_runs.sql``), stated here for the ORM backend by the same rules.
"""

from datetime import datetime, timedelta
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.db.models.functions import Now

from agentstate.backends import events
from agentstate.backends.base import Changed
from agentstate.exceptions import (
    AlreadyConsumed,
    ArgumentsChanged,
    NotApproved,
    NotAReviewer,
    RuleExists,
    RuleNotFound,
    SelfApproval,
    VotesRequired,
)
from agentstate.models import ApprovalRequest, ApprovalRule, Event, Run
from agentstate.models.choices import OnDeadline
from agentstate.records import APPROVE, REJECT
from agentstate.types import DEADLINE_REASON, RULE_ACTOR, SWEEPER, Actor, Reach

from .operations import Operations

Status = ApprovalRequest.Status
# A rule's values, as its events' details and the REST form name them.
RULE_FIELDS = (
    "tool_name",
    "approvals_required",
    "reviewers_id",
    "allow_self_approval",
    "deadline",
    "on_deadline",
    "remind_before",
    "escalate_after",
    "escalate_to_id",
)


def rule_values(rule: ApprovalRule) -> dict[str, Any]:
    """The rule's values, for its events."""
    return {name: getattr(rule, name) for name in RULE_FIELDS}


def request_event(
    kind: str, request: ApprovalRequest, run: Run, by: Actor, **details: Any
) -> Event:
    """An event about ``request`` (of ``run``), its details naming the call."""
    return events.new(
        kind,
        ApprovalRequest,
        str(request.pk),
        by,
        created_by_id=request.created_by_id,
        details={
            "run_id": run.run_id,
            "tool_name": request.tool_name,
            "call_id": request.call_id,
            **details,
        },
    )


def seconds(value: int | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


class OversightOperations(Operations):
    # Filing and deciding under a rule (the ORM backend's request_approval and decide).

    def _stamp_rule(self, request: ApprovalRequest, approval_ttl: timedelta) -> None:
        """Copy the tool's rule, as it stands, onto a request being filed now (its
        deadline and escalation from the database's clock, read with the rule)."""
        rule = (
            self.rows(ApprovalRule).filter(tool_name=request.tool_name).annotate(now=Now()).first()
        )
        if rule is None:
            return
        now = rule.now
        deadline = now + (seconds(rule.deadline) or approval_ttl)
        request.rule = rule
        request.approvals_required = rule.approvals_required
        request.reviewers_id = rule.reviewers_id
        request.allow_self_approval = rule.allow_self_approval
        request.deadline = deadline
        request.on_deadline = rule.on_deadline
        remind = seconds(rule.remind_before)
        request.remind_at = None if remind is None else deadline - remind
        escalate = seconds(rule.escalate_after)
        request.escalate_at = None if escalate is None else now + escalate
        request.escalate_to_id = rule.escalate_to_id

    def _in_group(self, user_id: int | None, group_id: int | None) -> bool:
        if user_id is None or group_id is None:
            return False
        user_model = get_user_model()
        try:
            user_model._meta.get_field("groups")
        except Exception:  # a user model without groups
            return False
        return self.rows(user_model).filter(pk=user_id, groups=group_id).exists()

    def _check_may_decide(
        self, run: Run, request: ApprovalRequest, user_id: int | None, now: datetime
    ) -> bool:
        """``SelfApproval`` and ``NotAReviewer``, as ``agentstate_decide`` checks them
        (``now``: the database's clock); whether ``user_id`` may decide by escalation
        only (not among the reviewers)."""
        if not request.allow_self_approval and user_id is not None:
            if run.created_by_id == user_id:
                raise SelfApproval.of()
        needs_reviewer = request.reviewers_id is not None or (
            request.approvals_required > 1 and user_id is None
        )
        if not needs_reviewer or self._in_group(user_id, request.reviewers_id):
            return False
        escalated = request.escalate_at is not None and request.escalate_at <= now
        if escalated and self._in_group(user_id, request.escalate_to_id):
            return True
        raise NotAReviewer.of(tool_name=request.tool_name)

    # Standing decisions (policies, and approvals written into a run's records) under a
    # rule, as ``agentstate_check_standing`` and ``agentstate_policy_stands`` say.

    def _check_standing(
        self, tool_name: str, approve: bool, user_id: int | None, creator_id: int | None
    ) -> None:
        """Refuse a standing decision of ``tool_name`` by ``user_id`` (of the runs of
        ``creator_id``) that the tool's rule does not let that user make alone:
        ``SelfApproval``, ``NotAReviewer`` (escalation is a request's, and a standing
        decision has none), or ``VotesRequired`` for an approval the rule wants from
        several reviewers."""
        rule = self.rows(ApprovalRule).filter(tool_name=tool_name).first()
        if rule is None:
            return
        if not rule.allow_self_approval and user_id is not None and user_id == creator_id:
            raise SelfApproval.of()
        if rule.reviewers_id is not None and not self._in_group(user_id, rule.reviewers_id):
            raise NotAReviewer.of(tool_name=tool_name)
        if approve and rule.approvals_required > 1:
            raise VotesRequired.of(tool_name=tool_name, approvals_required=rule.approvals_required)

    def _policy_stands(
        self, rule: ApprovalRule | None, approve: bool, by_id: int | None, run: Run
    ) -> bool:
        """Whether a policy (its decision, its creator's id) decides a call of ``run``
        under the tool's ``rule`` as it stands: not an approval the rule wants from
        several reviewers, nor one by the run's own creator where the rule refuses
        self-approval."""
        if rule is None:
            return True
        if approve and rule.approvals_required > 1:
            return False
        return rule.allow_self_approval or by_id is None or by_id != run.created_by_id

    # Using an approval once.

    def consume(
        self, run_id: str, tool_name: str, call_id: str, digest: str, reach: Reach | None, by: Actor
    ) -> Changed[ApprovalRequest]:
        return self.atomic(self._consume, run_id, tool_name, call_id, digest, reach, by)

    def _consume(
        self, run_id: str, tool_name: str, call_id: str, digest: str, reach: Reach | None, by: Actor
    ) -> Changed[ApprovalRequest]:
        runs = self.rows(Run).filter(run_id=run_id)
        if reach is not None:
            runs = runs.created_by_user(reach.user_id)
        run = runs.select_for_update().first()
        if run is None:
            from agentstate.exceptions import RunNotFound

            raise RunNotFound.of(run_id=run_id)
        request = (
            self.rows(ApprovalRequest)
            .select_for_update()
            .filter(run=run, call_id=call_id, tool_name=tool_name)
            .first()
        )
        if request is None or request.status != Status.APPROVED:
            raise NotApproved.of(tool_name=tool_name, call_id=call_id)
        if request.arguments_digest and request.arguments_digest != digest:
            raise ArgumentsChanged.of(tool_name=tool_name, call_id=call_id)
        if request.consumed_at is not None:
            raise AlreadyConsumed.of(tool_name=tool_name, call_id=call_id)
        request.consumed_at = Now()
        request.save(using=self.alias, update_fields=["consumed_at"])
        request.refresh_from_db(using=self.alias, fields=["consumed_at"])
        request.run = run
        event = request_event(
            "approval.consumed",
            request,
            run,
            by,
            arguments_digest=digest,
            consumed_at=events.json_time(cast(datetime, request.consumed_at)),
        )
        events.save(self.alias, [event])
        return Changed(request, [event])

    # Approval rules.

    def create_rule(self, values: dict[str, Any], by: Actor) -> Changed[ApprovalRule]:
        return self.atomic(self._create_rule, values, by)

    def _create_rule(self, values: dict[str, Any], by: Actor) -> Changed[ApprovalRule]:
        rule = ApprovalRule(**values)
        self._save_rule(rule)
        event = events.new(
            "rule.created", ApprovalRule, str(rule.pk), by, details=rule_values(rule)
        )
        events.save(self.alias, [event])
        return Changed(rule, [event])

    def _save_rule(self, rule: ApprovalRule) -> None:
        """Save, a tool's second rule refused (``RuleExists``), also when a concurrent
        writer takes the tool first."""
        if self.rows(ApprovalRule).filter(tool_name=rule.tool_name).exclude(pk=rule.pk).exists():
            raise RuleExists.of(tool_name=rule.tool_name)
        rule.updated_at = Now()  # the database's clock, as created_at's; read back below
        try:
            with transaction.atomic(using=self.alias):
                rule.save(using=self.alias)
        except IntegrityError:
            raise RuleExists.of(tool_name=rule.tool_name) from None
        rule.refresh_from_db(using=self.alias, fields=["created_at", "updated_at"])

    def change_rule(self, rule_id: int, values: dict[str, Any], by: Actor) -> Changed[ApprovalRule]:
        return self.atomic(self._change_rule, rule_id, values, by)

    def _change_rule(
        self, rule_id: int, values: dict[str, Any], by: Actor
    ) -> Changed[ApprovalRule]:
        rule = self.rows(ApprovalRule).select_for_update().filter(pk=rule_id).first()
        if rule is None:
            raise RuleNotFound.of(rule_id=rule_id)
        before = rule_values(rule)
        for name, value in values.items():
            setattr(rule, name, value)
        self._save_rule(rule)
        after = rule_values(rule)
        changed = {name: after[name] for name in RULE_FIELDS if after[name] != before[name]}
        event = events.new(
            "rule.changed",
            ApprovalRule,
            str(rule.pk),
            by,
            details={"tool_name": rule.tool_name, "changed": changed, "before": before},
        )
        events.save(self.alias, [event])
        return Changed(rule, [event])

    def delete_rule(self, rule_id: int, by: Actor) -> Changed[ApprovalRule]:
        return self.atomic(self._delete_rule, rule_id, by)

    def _delete_rule(self, rule_id: int, by: Actor) -> Changed[ApprovalRule]:
        rule = self.rows(ApprovalRule).select_for_update().filter(pk=rule_id).first()
        if rule is None:
            raise RuleNotFound.of(rule_id=rule_id)
        event = events.new(
            "rule.deleted", ApprovalRule, str(rule.pk), by, details=rule_values(rule)
        )
        rule.delete(using=self.alias)
        rule.pk = rule_id
        events.save(self.alias, [event])
        return Changed(rule, [event])

    # The deadlines' sweep.

    def apply_deadlines(self, size: int, after: Any = None) -> Changed[int]:
        due = Q(deadline__lte=Now()) | Q(remind_at__lte=Now(), reminded_at__isnull=True)
        due |= Q(escalate_at__lte=Now(), escalated_at__isnull=True)
        if after is not None:
            deadline, pk = after
            due &= Q(deadline__gt=deadline) | Q(deadline=deadline, pk__gt=pk)
        candidates = list(
            self.rows(ApprovalRequest)
            .filter(Q(status=Status.PENDING, deadline__isnull=False) & due)
            .order_by("deadline", "pk")
            .values_list("deadline", "pk")[:size]
        )
        written: list[Event] = []
        for _deadline, pk in candidates:
            written.extend(self.atomic(self._apply_deadline, pk))
        return Changed(len(candidates), written, candidates[-1] if candidates else after)

    def _apply_deadline(self, pk: int) -> list[Event]:
        """One request's due steps, under its run's row lock then its own, each once."""
        run_pk = self.rows(ApprovalRequest).filter(pk=pk).values_list("run_id", flat=True).first()
        if run_pk is None:
            return []
        run = self.rows(Run).select_for_update().filter(pk=run_pk).first()
        request = (
            self.rows(ApprovalRequest)
            .select_for_update()
            .filter(pk=pk, status=Status.PENDING)
            .annotate(now=Now())
            .first()
        )
        if run is None or request is None or request.deadline is None:
            return []
        now = request.now
        rule_actor = Actor(None, RULE_ACTOR % request.rule_id) if request.rule_id else SWEEPER
        written: list[Event] = []
        updated: list[str] = []
        if request.deadline <= now:
            if request.on_deadline == OnDeadline.EXPIRE:
                request.status = Status.EXPIRED
                written.append(request_event("approval.expired", request, run, rule_actor))
                updated.append("status")
            else:
                approve = request.on_deadline == OnDeadline.APPROVE
                reason = DEADLINE_REASON
                written.append(
                    self._deadline_decision(
                        run, request.tool_name, request.call_id, approve, reason, rule_actor
                    )
                )
                request.status = Status.APPROVED if approve else Status.REJECTED
                request.decided_at, request.reason = now, reason
                written.append(
                    request_event(
                        "approval.decided",
                        request,
                        run,
                        rule_actor,
                        decision=APPROVE if approve else REJECT,
                        always=False,
                        reason=reason,
                        rule=request.rule_id,
                        arguments_digest=request.arguments_digest,
                    )
                )
                updated += ["status", "decided_at", "reason"]
        else:
            if _due(request.remind_at, request.reminded_at, now):
                request.reminded_at = now
                updated.append("reminded_at")
                deadline = events.json_time(request.deadline)
                written.append(
                    request_event("approval.expiring", request, run, SWEEPER, deadline=deadline)
                )
            if _due(request.escalate_at, request.escalated_at, now):
                request.escalated_at = now
                updated.append("escalated_at")
                written.append(
                    request_event(
                        "approval.escalated",
                        request,
                        run,
                        SWEEPER,
                        escalate_to=request.escalate_to_id,
                    )
                )
        if updated:
            request.save(using=self.alias, update_fields=updated)
        # The record's event is saved already (by the decision); the others here.
        saved = [e for e in written if e.pk is not None]
        return saved + events.save(self.alias, [e for e in written if e.pk is None])

    def _deadline_decision(
        self, run: Run, tool_name: str, call_id: str, approve: bool, reason: str, by: Actor
    ) -> Event:
        """Write the run's record of a call decided at its deadline (the run's row
        locked); returns its ``approvals.changed`` event, saved."""
        raise NotImplementedError


def _due(at: datetime | None, done: datetime | None, now: datetime) -> bool:
    """A step at ``at`` not ``done`` yet that is due by ``now``."""
    return at is not None and done is None and at <= now
