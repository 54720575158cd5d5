"""Shapes of ``GET /api/events/``: its query and one event."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentstate.models import Event
from agentstate.services.waiting import check_wait
from agentstate.signals import BY_KIND

from ..access import object_types
from ..fields import KeyField, QuerySerializer, RunIdField
from ..ids import MAX_ID, path_id
from ..schema import WAIT_SCHEMA


@extend_schema_field({"type": "integer", "minimum": 0, "maximum": MAX_ID})
class EventIdField(serializers.Field):
    """An event id to follow from: a non-negative integer (decimal digits)."""

    def to_internal_value(self, data: Any) -> int:
        found = path_id(data) if isinstance(data, str) else None
        if found is None:
            raise serializers.ValidationError("Must be a non-negative integer (an event id).")
        return found

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field(WAIT_SCHEMA)
class WaitField(serializers.Field):
    """``?wait=S``: checked by ``services.waiting.check_wait`` (a 400 naming ``wait``)."""

    def to_internal_value(self, data: Any) -> float:
        return check_wait(data, self.field_name or "wait")

    def to_representation(self, value: Any) -> Any:
        return value


class EventQuery(QuerySerializer):
    object_type = serializers.ChoiceField(choices=[], required=False)
    object_id = KeyField(required=False, max_length=Event._meta.get_field("object_id").max_length)
    kind = serializers.ChoiceField(choices=sorted(BY_KIND), required=False)
    run_id = RunIdField(required=False, help_text="Events of the run and of its approval requests.")
    after = EventIdField(
        required=False, help_text="Events above this id, oldest first (without: newest first)."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["object_type"]
        assert isinstance(field, serializers.ChoiceField)
        field.choices = object_types()


class EventFeedQuery(EventQuery):
    wait = WaitField(
        required=False,
        help_text="With after: seconds an empty answer waits for the first matching event "
        "(above 0, at most AGENTSTATE['MAX_WAIT']).",
    )


class EventSerializer(serializers.ModelSerializer):
    user: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    created_by: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    details = serializers.JSONField()

    class Meta:
        model = Event
        fields = [
            "id",
            "kind",
            "actor",
            "user",
            "object_type",
            "object_id",
            "created_by",
            "owner",
            "details",
            "created_at",
        ]
        read_only_fields = fields
