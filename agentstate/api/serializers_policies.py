"""Shapes of the approval-policy endpoints. Users are named by their usernames."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentstate.models import ApprovalPolicy

from .fields import AnyJSONField, KeyField, QuerySerializer, StrictCharField, StrictSerializer


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
