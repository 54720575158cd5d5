"""Shapes of the approval-policy and budget endpoints.

Policies name users by their usernames. A budget's cap is an integer from 0
to 2**63 - 1, or ``null`` for none; a counter a body leaves out keeps its cap.
``used``, ``remaining``, ``resets_at`` and the period's start are the
server's: no request serializer has them, and unknown fields are refused.
"""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentstate.models import ApprovalPolicy
from agentstate.services.budgets import MAX_CAP, PERIODS

from ..fields import (
    AnyJSONField,
    KeyField,
    QuerySerializer,
    StrictCharField,
    StrictIntegerField,
    StrictSerializer,
)


class StrictDateTimeField(serializers.DateTimeField):
    """An ISO 8601 time, sent as a string (no number taken for one)."""

    def to_internal_value(self, value: Any) -> Any:
        if not isinstance(value, str):
            raise serializers.ValidationError("Must be an ISO 8601 date and time.", code="invalid")
        return super().to_internal_value(value)


@extend_schema_field({"type": "object", "additionalProperties": True, "nullable": True})
class ArgumentsPatternField(AnyJSONField):
    """A JSON object the calls' arguments must contain, or null."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if value is not None and not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object or null.")
        return value


class PolicyCreate(StrictSerializer):
    tool_name = KeyField()
    decision = serializers.ChoiceField(choices=ApprovalPolicy.Decision.values)
    user = KeyField(
        required=False,
        allow_null=True,
        default=None,
        help_text="The username whose runs it decides; null or omitted: every user's.",
    )
    arguments = ArgumentsPatternField(
        required=False,
        default=None,
        help_text="An object the call's arguments must contain (every key equal, recursively);"
        " null or omitted: any arguments.",
    )
    expires_at = StrictDateTimeField(
        required=False,
        allow_null=True,
        default=None,
        help_text="ISO 8601, in the future; null or omitted: until revoked.",
    )
    reason = StrictCharField(required=False, allow_blank=True, default="")


class PolicyQuery(QuerySerializer):
    tool_name = KeyField(required=False)
    user = KeyField(required=False, help_text="A username: the policies for that user's runs.")
    active = serializers.ChoiceField(
        choices=["true", "false"],
        required=False,
        help_text="true: neither revoked nor expired; false: revoked or expired.",
    )


class ApprovalPolicySerializer(serializers.ModelSerializer):
    """A policy as REST shows it; ``user`` and ``created_by`` are usernames or null."""

    user = serializers.SerializerMethodField()
    created_by = serializers.SerializerMethodField()
    arguments = serializers.JSONField(allow_null=True, read_only=True)

    class Meta:
        model = ApprovalPolicy
        fields = (
            "id",
            "tool_name",
            "decision",
            "user",
            "arguments",
            "expires_at",
            "reason",
            "created_by",
            "created_at",
            "revoked_at",
        )
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_user(self, policy: ApprovalPolicy) -> str | None:
        return _name(policy, "user")

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_created_by(self, policy: ApprovalPolicy) -> str | None:
        return _name(policy, "created_by")


def _name(policy: ApprovalPolicy, field: str) -> str | None:
    """The username of ``field``, as the backend or the listing's annotation gave it."""
    name: str | None = getattr(policy, f"{field}_name")
    return name


# Budgets


def _cap(counter: str) -> StrictIntegerField:
    return StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=MAX_CAP,
        help_text=f"The cap on {counter}; null removes it, left out keeps it.",
    )


class RunBudgetRequest(StrictSerializer):
    requests = _cap("model requests")
    input_tokens = _cap("input tokens")
    output_tokens = _cap("output tokens")
    total_tokens = _cap("total tokens")


class UserBudgetRequest(RunBudgetRequest):
    period = serializers.ChoiceField(
        choices=PERIODS,
        allow_null=True,
        required=False,
        help_text="null: never resets; day or month: resets at the start of each UTC day or"
        " month. Left out keeps it; a change starts a new period, counted from 0.",
    )


class CapsSerializer(serializers.Serializer):
    requests = serializers.IntegerField(allow_null=True)
    input_tokens = serializers.IntegerField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
    total_tokens = serializers.IntegerField(allow_null=True)


class UsedSerializer(serializers.Serializer):
    requests = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()


class RunBudgetSerializer(serializers.Serializer):
    """A run's budget: ``used`` is the run's usage; ``remaining`` is null where uncapped."""

    caps = CapsSerializer()
    used = UsedSerializer()
    remaining = CapsSerializer(help_text="cap - used, never below 0; null where uncapped.")


class UserBudgetSerializer(RunBudgetSerializer):
    """A user's budget over every run the user created: ``used`` in the current period."""

    period = serializers.ChoiceField(choices=PERIODS, allow_null=True)
    resets_at = serializers.DateTimeField(
        allow_null=True, help_text="When the current period ends; null without a period."
    )
