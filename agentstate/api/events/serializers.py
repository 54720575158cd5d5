"""Shapes of ``GET /api/events/``: its query and one event."""

from typing import Any

from rest_framework import serializers

from agentstate.models import Event
from agentstate.signals import BY_KIND

from ..access import object_types
from ..fields import KeyField, QuerySerializer


class EventQuery(QuerySerializer):
    object_type = serializers.ChoiceField(choices=[], required=False)
    object_id = KeyField(required=False, max_length=Event._meta.get_field("object_id").max_length)
    kind = serializers.ChoiceField(choices=sorted(BY_KIND), required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["object_type"]
        assert isinstance(field, serializers.ChoiceField)
        field.choices = object_types()


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
