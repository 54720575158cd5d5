"""Shapes of the approval-rule endpoints. Groups go by their names; periods are
whole seconds. ``id`` and the timestamps are the server's."""

from rest_framework import serializers

from agentstate.models import ApprovalRule
from agentstate.services.oversight import MAX_APPROVALS, MAX_SECONDS

from ..fields import (
    KeyField,
    QuerySerializer,
    StrictBooleanField,
    StrictIntegerField,
    StrictSerializer,
)


def _seconds(help_text: str) -> StrictIntegerField:
    return StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_SECONDS, help_text=help_text
    )


def _group(help_text: str) -> KeyField:
    return KeyField(required=False, allow_null=True, max_length=150, help_text=help_text)


class RuleWrite(StrictSerializer):
    """A rule's values; creating takes ``tool_name``, a PATCH any of them."""

    tool_name = KeyField(required=False)
    approvals_required = StrictIntegerField(
        required=False,
        min_value=1,
        max_value=MAX_APPROVALS,
        help_text="Distinct reviewers whose approval of the same arguments decides (default 1).",
    )
    reviewers = _group("A group's name: only its members decide; null: anyone who may decide.")
    allow_self_approval = StrictBooleanField(
        required=False, help_text="Whether the run's creator may decide (default false)."
    )
    deadline = _seconds("Seconds a request stays pending; null: APPROVAL_TTL.")
    on_deadline = serializers.ChoiceField(
        choices=ApprovalRule.OnDeadline.values,
        required=False,
        help_text="What the deadline does to a pending request (default expire).",
    )
    remind_before = _seconds("Seconds before the deadline of one approval.expiring event.")
    escalate_after = _seconds("Seconds after which escalate_to's members may decide too.")
    escalate_to = _group("A group's name, with escalate_after.")


class RuleCreate(RuleWrite):
    tool_name = KeyField()


class RuleSerializer(serializers.ModelSerializer):
    reviewers = serializers.SerializerMethodField()
    escalate_to = serializers.SerializerMethodField()

    class Meta:
        model = ApprovalRule
        fields = (
            "id",
            "tool_name",
            "approvals_required",
            "reviewers",
            "allow_self_approval",
            "deadline",
            "on_deadline",
            "remind_before",
            "escalate_after",
            "escalate_to",
            "created_at",
            "updated_at",
        )
        read_only_fields = fields

    def get_reviewers(self, rule: ApprovalRule) -> str | None:
        return None if rule.reviewers is None else rule.reviewers.name

    def get_escalate_to(self, rule: ApprovalRule) -> str | None:
        return None if rule.escalate_to is None else rule.escalate_to.name


class RuleQuery(QuerySerializer):
    tool_name = KeyField(required=False)
