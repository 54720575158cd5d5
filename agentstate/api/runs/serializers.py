"""Request and response shapes of the run, approval and review-queue endpoints.

``status``, ``decided_by``, ``decided_at`` and the timestamps are never
writable: no request serializer has them, and unknown fields are refused.
The approval records map is validated by ``services.runs.check_records``
(one rule for Python and REST callers).
"""

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentstate.models import KEY_LENGTH, ApprovalPolicy, ApprovalRequest, Vote
from agentstate.services import approvals
from agentstate.services.budgets import COUNTERS
from agentstate.services.runs import DIGEST, MAX_INCREMENT

from ..base import represent_in, show_time
from ..fields import (
    TEXT_PATTERN,
    AnyJSONField,
    KeyField,
    QuerySerializer,
    RunIdField,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    StrictSerializer,
)
from ..schema import ErrorSerializer

# One side of a record: true, false or a list of call ids (OpenAPI 3.0).
CALL_ID_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": KEY_LENGTH,
    "pattern": TEXT_PATTERN,
}
SIDE_SCHEMA = {"oneOf": [{"type": "boolean"}, {"type": "array", "items": CALL_ID_SCHEMA}]}
RECORDS_SCHEMA = {
    "type": "object",
    "description": "Per tool name, the OpenAI Agents SDK's approval record.",
    "additionalProperties": {
        "type": "object",
        "properties": {"approved": SIDE_SCHEMA, "rejected": SIDE_SCHEMA},
        "additionalProperties": False,
    },
}


@extend_schema_field(RECORDS_SCHEMA)
class RecordsField(serializers.DictField):
    """The approval records map (documentation only; responses are built by the service)."""


class UsageSerializer(serializers.Serializer):
    requests = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cached_tokens = serializers.IntegerField()
    reasoning_tokens = serializers.IntegerField()


class RunSerializer(serializers.Serializer):
    """``to_json()`` of a run: what a client stores to resume it."""

    run_id = serializers.CharField()
    context = serializers.JSONField(allow_null=True)  # type: ignore[assignment]
    usage = UsageSerializer()
    approvals = RecordsField()


class RunCreateRequest(StrictSerializer):
    run_id = RunIdField(
        required=False,
        help_text="1 to 128 characters of A-Z a-z 0-9 . _ : - (not '.' or '..'); a UUID when omitted.",
    )
    context = AnyJSONField(  # type: ignore[assignment]
        required=False, help_text="The application's own data (null or omitted: {})."
    )


class RunUpdateRequest(StrictSerializer):
    """A partial update: ``context`` is the one writable field, so ``{}`` changes nothing."""

    context = AnyJSONField(  # type: ignore[assignment]
        required=False, help_text="Replaces the run's context."
    )


def _count(help_text: str) -> StrictIntegerField:
    return StrictIntegerField(
        required=False, min_value=0, max_value=MAX_INCREMENT, help_text=help_text
    )


class UsageRequest(StrictSerializer):
    requests = _count("Model requests to add (default 1).")
    input_tokens = _count("Default 0.")
    output_tokens = _count("Default 0.")
    total_tokens = _count("Default input_tokens + output_tokens.")
    cached_tokens = _count("Default 0.")
    reasoning_tokens = _count("Default 0.")


class DigestField(StrictCharField):
    """A SHA-256 in lowercase hex: the canonical JSON of a call's arguments."""

    openapi: ClassVar[dict[str, Any]] = {"pattern": f"^{DIGEST.pattern}$"}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_length", 64)
        kwargs.setdefault("max_length", 64)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not DIGEST.fullmatch(value):
            raise serializers.ValidationError("Must be a SHA-256 in lowercase hex.", code="invalid")
        return value


class ApprovalQuery(QuerySerializer):
    tool_name = KeyField(required=False)
    call_id = KeyField(required=False)
    arguments_digest = DigestField(
        required=False,
        help_text="With tool_name and call_id: approved only for these arguments"
        " (else false, reason arguments_changed).",
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("tool_name" in data) != ("call_id" in data):
            missing = "call_id" if "tool_name" in data else "tool_name"
            raise serializers.ValidationError(
                {missing: ["Give both tool_name and call_id, or neither."]}
            )
        if "arguments_digest" in data and "call_id" not in data:
            raise serializers.ValidationError(
                {"tool_name": ["arguments_digest takes tool_name and call_id."]}
            )
        return data


class ConsumeRequest(StrictSerializer):
    tool_name = KeyField()
    call_id = KeyField()
    arguments_digest = DigestField(help_text="The digest of the arguments about to run.")


class ApprovalCheck(serializers.Serializer):
    tool_name = serializers.CharField()
    call_id = serializers.CharField()
    approved = serializers.BooleanField(
        allow_null=True, help_text="true, false, or null while pending."
    )
    reason = serializers.CharField(
        required=False, help_text="arguments_changed: approved for other arguments."
    )


class ApprovalChangeRequest(StrictSerializer):
    tool_name = KeyField()
    call_id = KeyField()
    always = StrictBooleanField(
        required=False, default=False, help_text="Decide every call of the tool."
    )


class ApprovalRequestCreate(StrictSerializer):
    tool_name = KeyField()
    call_id = KeyField()
    arguments = AnyJSONField(required=False, help_text="The tool call's arguments, any JSON value.")


class ApprovalRequestQuery(QuerySerializer):
    status = serializers.ChoiceField(choices=ApprovalRequest.Status.values, required=False)
    tool_name = KeyField(required=False)
    run_id = RunIdField(required=False)


class DecideRequest(StrictSerializer):
    decision = serializers.ChoiceField(choices=ApprovalPolicy.Decision.values)
    always = StrictBooleanField(
        required=False, default=False, help_text="Decide every call of the tool."
    )
    reason = StrictCharField(required=False, allow_blank=True, default="")
    arguments = AnyJSONField(
        required=False,
        default=None,
        help_text="With approve: the arguments to run instead of the filed ones (kept as"
        " approved_arguments unless equal to them). Not with reject.",
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if (
            data.get("arguments") is not None
            and data["decision"] != ApprovalPolicy.Decision.APPROVE
        ):
            raise serializers.ValidationError(
                {"arguments": ["Arguments can be edited only when approving."]}
            )
        return data


@extend_schema_field(serializers.DateTimeField())
class DeadlineField(serializers.Field):
    """When the request stops being pending (``approvals.deadline_of``)."""

    def to_representation(self, value: ApprovalRequest) -> Any:
        return serializers.DateTimeField().to_representation(approvals.deadline_of(value))

    def read_row(self, request: ApprovalRequest, zone: Any) -> Any:
        """As ``to_representation``, in a listing (``base.represent_rows``)."""
        return show_time(approvals.deadline_of(request), zone)


class VoteSerializer(serializers.Serializer):
    by = serializers.SerializerMethodField()
    decision = serializers.CharField()
    arguments_digest = serializers.CharField()
    reason = serializers.CharField()
    at = serializers.DateTimeField()

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_by(self, vote: Vote) -> str | None:
        return None if vote.by is None else vote.by.get_username()


@extend_schema_field(VoteSerializer(many=True))
class VotesField(serializers.Field):
    """The request's votes, oldest first (``approvals.votes_of``)."""

    def to_representation(self, value: ApprovalRequest) -> Any:
        return VoteSerializer(approvals.votes_of(value), many=True).data

    def read_row(self, request: ApprovalRequest, zone: Any) -> Any:
        """As ``to_representation``, in a listing (``base.represent_rows``)."""
        if request.rule_id is None:  # no votes (``votes_of``)
            return []
        return represent_in(VoteSerializer, approvals.votes_of(request), zone)


class ApprovalRequestSerializer(serializers.ModelSerializer):
    """A request as REST shows it; a pending one past ``APPROVAL_TTL`` reads ``expired``."""

    run_id = serializers.CharField(source="run.run_id", read_only=True)
    arguments = serializers.JSONField(allow_null=True, read_only=True)
    status = serializers.SerializerMethodField()
    decided_by = serializers.SerializerMethodField()
    policy = serializers.IntegerField(
        source="policy_id",
        allow_null=True,
        read_only=True,
        help_text="The approval policy that decided it, or null.",
    )
    approved_arguments = serializers.JSONField(
        allow_null=True,
        read_only=True,
        help_text="What the reviewer approved instead of the filed arguments, or null.",
    )
    # Oversight's fields, on every request: one filed under no rule reads 1, no votes,
    # its creation plus APPROVAL_TTL.
    approvals_required = serializers.IntegerField(
        help_text="Distinct reviewers whose approval decides (1 under no rule)."
    )
    votes = VotesField(source="*")
    deadline = DeadlineField(source="*")
    arguments_digest = serializers.CharField(
        help_text="SHA-256 of the arguments as filed, then as approved."
    )

    class Meta:
        model = ApprovalRequest
        fields = (
            "id",
            "run_id",
            "tool_name",
            "call_id",
            "arguments",
            "status",
            "decided_by",
            "decided_at",
            "reason",
            "policy",
            "approved_arguments",
            "created_at",
            "approvals_required",
            "votes",
            "deadline",
            "arguments_digest",
        )
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=ApprovalRequest.Status.values))
    def get_status(self, request: ApprovalRequest) -> str:
        return getattr(request, "current_status", request.status)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_decided_by(self, request: ApprovalRequest) -> str | None:
        return request.decided_by.get_username() if request.decided_by is not None else None


class BudgetExceededSerializer(ErrorSerializer):
    """409 ``budget_exceeded``: the budget and the counter that refused the add."""

    budget = serializers.ChoiceField(choices=["run", "user"])
    counter = serializers.ChoiceField(choices=list(COUNTERS))


class ConsumedSerializer(ApprovalRequestSerializer):
    """The request whose approval was used, with when."""

    consumed_at = serializers.DateTimeField(read_only=True)

    class Meta:
        model = ApprovalRequest
        fields: tuple[str, ...] = (*ApprovalRequestSerializer.Meta.fields, "consumed_at")
        read_only_fields = fields
