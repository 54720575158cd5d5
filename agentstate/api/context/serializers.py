"""Request and response shapes of the context endpoints (docs/rest-api.md)."""

from rest_framework import serializers

from agentstate.models import Scope
from agentstate.services.context import MODES

from ..fields import (
    AnyJSONField,
    KeyField,
    QueryIntegerField,
    QuerySerializer,
    StrictCharField,
    StrictIntegerField,
    StrictSerializer,
)


class OwnerMixin(serializers.Serializer):
    owner = KeyField(
        required=False, help_text="Another user's username (needs the model permission)."
    )


# Context variables


class ContextQuery(OwnerMixin, QuerySerializer):
    scope = KeyField()
    name = serializers.ListField(child=KeyField(), required=False, allow_empty=True)


class ContextDeleteQuery(OwnerMixin, QuerySerializer):
    scope = KeyField()
    name = KeyField()


class ContextValues(serializers.Serializer):
    scope = serializers.CharField()
    values = serializers.DictField(child=serializers.JSONField(allow_null=True))


class ListQuery(OwnerMixin, QuerySerializer):
    scope = KeyField()
    name = KeyField()
    last = QueryIntegerField(
        required=False,
        min_value=1,
        max_value=2**63 - 1,
        help_text="Only the list's last this many elements (default: all of them).",
    )


class ListValues(serializers.Serializer):
    scope = serializers.CharField()
    name = serializers.CharField()
    values = serializers.ListField(
        child=serializers.JSONField(allow_null=True),
        help_text="The elements in order (the last `last` of them when given).",
    )
    length = serializers.IntegerField(help_text="The whole list's length.")


class PutRequest(OwnerMixin, StrictSerializer):
    scope = KeyField()
    name = KeyField()
    value = AnyJSONField()
    if_version = StrictIntegerField(required=False, min_value=0, allow_null=True)


class PutResponse(serializers.Serializer):
    scope = serializers.CharField()
    name = serializers.CharField()
    value = serializers.JSONField(allow_null=True)
    version = serializers.IntegerField()


class PushRequest(OwnerMixin, StrictSerializer):
    scope = KeyField()
    name = KeyField()
    value = AnyJSONField()


class PushResponse(serializers.Serializer):
    scope = serializers.CharField()
    name = serializers.CharField()
    length = serializers.IntegerField()
    version = serializers.IntegerField()


class PopRequest(OwnerMixin, StrictSerializer):
    scope = KeyField()
    name = KeyField()
    mode = StrictCharField(
        required=False,
        default="LIFO",
        help_text="LIFO (default) or FIFO.",
        openapi={"enum": list(MODES)},
    )


class PopResponse(serializers.Serializer):
    scope = serializers.CharField()
    name = serializers.CharField()
    value = serializers.JSONField(allow_null=True)


class ScopeQuery(OwnerMixin, QuerySerializer):
    prefix = StrictCharField(required=False, allow_blank=True, max_length=255)


class ScopeDeleteQuery(OwnerMixin, QuerySerializer):
    scope = KeyField()


class ScopeSerializer(serializers.ModelSerializer):
    scope = serializers.CharField(source="key")
    owner: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    variables = serializers.IntegerField(source="variable_count")

    class Meta:
        model = Scope
        fields = ["scope", "owner", "variables", "created_at"]
        read_only_fields = fields
