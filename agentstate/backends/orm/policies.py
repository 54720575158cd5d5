"""Approval policies on the ORM: creating, revoking, and finding the one that decides a call.

A request locks the matching policies' rows (``SELECT ... FOR UPDATE``, the
ORM's only row lock) after the run's, and a revocation locks the policy's
row before it writes ``revoked_at``: a policy being revoked decides a
request that committed first, and no request after. SQLite's IMMEDIATE
transactions serialize the two instead.
"""

from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from agentstate.backends import events
from agentstate.backends.base import Changed
from agentstate.backends.events import json_time
from agentstate.db import database_now
from agentstate.exceptions import AlreadyRevoked, PastExpiry, PolicyNotFound, UnknownOwner
from agentstate.models import ApprovalPolicy, ApprovalRule, Run
from agentstate.policies import active, matches
from agentstate.types import Actor, Owner

from .oversight import OversightOperations

Decision = ApprovalPolicy.Decision


class PolicyOperations(OversightOperations):
    def _deciding_policy(
        self, run: Run, tool_name: str, arguments: Any, *, lock: bool
    ) -> ApprovalPolicy | None:
        """The active policy that decides a call the run's records leave undecided: a
        matching reject policy before an approve one, the oldest of each first, of
        those the tool's rule lets decide it (``_policy_stands``)."""
        mine = Q(user__isnull=True)
        if run.created_by_id is not None:
            mine |= Q(user_id=run.created_by_id)
        candidates = self.rows(ApprovalPolicy).filter(mine, active(), tool_name=tool_name)
        candidates = candidates.order_by("pk")
        if lock:
            candidates = candidates.select_for_update()
        found = [policy for policy in candidates if matches(policy.arguments, arguments)]
        if found:
            rule = self.rows(ApprovalRule).filter(tool_name=tool_name).first()
            found = [
                policy
                for policy in found
                if self._policy_stands(
                    rule, policy.decision == Decision.APPROVE, policy.created_by_id, run
                )
            ]
        rejecting = [policy for policy in found if policy.decision == Decision.REJECT]
        chosen = rejecting or found
        return chosen[0] if chosen else None

    def _policy_user_id(self, user: Owner) -> int | None:
        if not isinstance(user, str):
            return user
        found = self.user_pk(user)
        if found is None:
            raise UnknownOwner.of(username=user, field="user")
        return found

    def _named(self, policy: ApprovalPolicy) -> ApprovalPolicy:
        """The policy with ``user_name`` and ``created_by_name``: one query for both."""
        user_model = get_user_model()
        ids = {pk for pk in (policy.user_id, policy.created_by_id) if pk is not None}
        names = dict(
            user_model._default_manager.using(self.alias)
            .filter(pk__in=ids)
            .values_list("pk", user_model.USERNAME_FIELD)
            if ids
            else []
        )
        policy.user_name = names.get(policy.user_id)  # type: ignore[attr-defined]
        policy.created_by_name = names.get(policy.created_by_id)  # type: ignore[attr-defined]
        return policy

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
        return self.atomic(
            self._create_policy, tool_name, approve, user, arguments, expires_at, reason, by
        )

    def _create_policy(
        self,
        tool_name: str,
        approve: bool,
        user: Owner,
        arguments: dict[str, Any] | None,
        expires_at: datetime | timedelta | None,
        reason: str,
        by: Actor,
    ) -> Changed[ApprovalPolicy]:
        if isinstance(expires_at, timedelta):  # from the database's clock, by which it is in force
            if expires_at <= timedelta(0):
                raise PastExpiry.of()
            expires_at = database_now(self.alias) + expires_at
        elif expires_at is not None and expires_at <= database_now(self.alias):
            raise PastExpiry.of()
        user_id = self._policy_user_id(user)
        self._check_standing(tool_name, approve, by.user_id, user_id)
        policy = self.rows(ApprovalPolicy).create(
            tool_name=tool_name,
            decision=Decision.APPROVE if approve else Decision.REJECT,
            user_id=user_id,
            arguments=arguments,
            expires_at=expires_at,
            reason=reason,
            created_by_id=by.user_id,
        )
        policy.refresh_from_db(using=self.alias, fields=["created_at"])
        event = events.new(
            "policy.created",
            ApprovalPolicy,
            str(policy.pk),
            by,
            created_by_id=policy.created_by_id,
            details={
                "tool_name": tool_name,
                "decision": policy.decision,
                "user_id": policy.user_id,
                "arguments": arguments,
                "expires_at": None if expires_at is None else json_time(expires_at),
                "reason": reason,
            },
        )
        events.save(self.alias, [event])
        return Changed(self._named(policy), [event])

    def revoke_policy(self, policy_id: int, by: Actor) -> Changed[ApprovalPolicy]:
        return self.atomic(self._revoke_policy, policy_id, by)

    def _revoke_policy(self, policy_id: int, by: Actor) -> Changed[ApprovalPolicy]:
        policy = self.rows(ApprovalPolicy).select_for_update().filter(pk=policy_id).first()
        if policy is None:
            raise PolicyNotFound.of(policy_id=policy_id)
        if policy.revoked_at is not None:
            raise AlreadyRevoked.of(policy_id=policy_id)
        # Taken once the row is locked, by the clock (microseconds, where SQLite's
        # Now() has milliseconds): after every request the policy decided.
        policy.revoked_at, policy.revoked_by_id = timezone.now(), by.user_id
        policy.save(using=self.alias, update_fields=["revoked_at", "revoked_by"])
        event = events.new(
            "policy.revoked",
            ApprovalPolicy,
            str(policy.pk),
            by,
            created_by_id=policy.created_by_id,
            details={
                "tool_name": policy.tool_name,
                "decision": policy.decision,
                "revoked_at": json_time(policy.revoked_at),
            },
        )
        events.save(self.alias, [event])
        return Changed(self._named(policy), [event])
