"""Request and response shapes of the pause endpoints (docs/rest-api.md).

``status``, ``question_id`` and the timestamps are never writable: no
request serializer has them, and unknown fields are refused.
"""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentstate.conf import agentstate_settings
from agentstate.models import PausedRun

from ..fields import (
    AnyJSONField,
    KeyField,
    QuerySerializer,
    StrictCharField,
    StrictIntegerField,
    StrictSerializer,
)


class PauseKeyRequest(StrictSerializer):
    chat_id = KeyField()
    tool_call_id = KeyField()


class PauseCreateRequest(PauseKeyRequest):
    owner = KeyField(
        help_text="The principal who may claim the pause (another than you needs add_pausedrun)."
    )
    payload = AnyJSONField(help_text="The run's saved state, any JSON value.")
    ttl_seconds = StrictIntegerField(
        required=False,
        min_value=1,
        help_text="Seconds until the pause expires: 1 to AGENTSTATE['MAX_PAUSE_TTL'] (default PAUSE_TTL).",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The schema states the site's limit (validate_ttl_seconds checks it).
        limit = int(agentstate_settings.MAX_PAUSE_TTL.total_seconds())
        self.fields["ttl_seconds"].openapi = {"maximum": limit}  # type: ignore[attr-defined]

    def validate_ttl_seconds(self, value: int) -> int:
        limit = int(agentstate_settings.MAX_PAUSE_TTL.total_seconds())
        if value > limit:
            raise serializers.ValidationError(
                f"Ensure this value is less than or equal to {limit}."
            )
        return value


class PauseClaimRequest(PauseKeyRequest):
    question_id = KeyField(help_text="The question id the pause was created with.")
    owner = KeyField(
        required=False,
        help_text="The owner to claim for (another than you needs change_pausedrun).",
    )


class PauseQuery(QuerySerializer):
    status = StrictCharField(
        required=False,
        help_text="pending, claimed, resolved or expired.",
        openapi={"enum": PausedRun.Status.values},
    )
    owner = KeyField(required=False)
    chat_id = KeyField(required=False)
    tool_call_id = KeyField(required=False)

    def validate_status(self, value: str) -> str:
        if value not in PausedRun.Status.values:
            raise serializers.ValidationError(
                f"Must be one of: {', '.join(PausedRun.Status.values)}."
            )
        return value


class PauseSerializer(serializers.ModelSerializer):
    """A pause as REST shows it; a pending one past its expiry reads ``expired``."""

    status = serializers.SerializerMethodField()
    payload = serializers.JSONField(allow_null=True, read_only=True)

    class Meta:
        model = PausedRun
        fields = [
            "chat_id",
            "tool_call_id",
            "owner",
            "question_id",
            "status",
            "payload",
            "created_at",
            "expires_at",
            "claimed_at",
            "claimed_by",
            "resolved_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=PausedRun.Status.values))
    def get_status(self, pause: PausedRun) -> str:
        return getattr(pause, "current_status", pause.status)
