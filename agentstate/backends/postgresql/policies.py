"""Approval policies on PostgreSQL: ``sql/35_policies.sql``."""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from agentstate.backends.base import Changed
from agentstate.backends.events import from_json as events_from_json
from agentstate.db import Json, from_json, group_membership
from agentstate.models import ApprovalPolicy
from agentstate.types import Actor, Owner


class PolicyOperations:
    alias: str
    call: Callable[..., dict[str, Any]]

    def _policy(self, result: dict[str, Any]) -> Changed[ApprovalPolicy]:
        policy = from_json(ApprovalPolicy, result["policy"], self.alias)
        return Changed(policy, events_from_json(result["events"], self.alias))

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
        return self._policy(
            self.call(
                "create_policy",
                p_tool=tool_name,
                p_approve=approve,
                p_user_id=None if isinstance(user, str) else user,
                p_username=user if isinstance(user, str) else None,
                p_arguments=None if arguments is None else Json(arguments),
                p_expires_at=expires_at if isinstance(expires_at, datetime) else None,
                p_expires_in=expires_at if isinstance(expires_at, timedelta) else None,
                p_reason=reason,
                p_by=by.user_id,
                p_actor=by.name,
                p_membership=group_membership(),
            )
        )

    def revoke_policy(self, policy_id: int, by: Actor) -> Changed[ApprovalPolicy]:
        return self._policy(
            self.call("revoke_policy", p_id=policy_id, p_by=by.user_id, p_actor=by.name)
        )
