"""Shapes of the webhook endpoints. The secret is shown once, in the creation's answer."""

from rest_framework import serializers

from agentstate.models import Delivery, DeliveryAttempt, Webhook
from agentstate.services.webhooks import KINDS
from agentstate.webhooks import URL_PATTERN

from ..fields import QuerySerializer, StrictBooleanField, StrictCharField, StrictSerializer


class WebhookCreate(StrictSerializer):
    url = StrictCharField(
        max_length=2000,
        help_text="An http or https URL.",
        openapi={"pattern": URL_PATTERN},
    )
    kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=KINDS),
        required=False,
        help_text="The event kinds it wants; none or empty: every kind.",
    )
    active = StrictBooleanField(required=False, default=True)


class WebhookSerializer(serializers.ModelSerializer):
    class Meta:
        model = Webhook
        fields = ["id", "url", "kinds", "active", "created_at"]


class CreatedWebhookSerializer(WebhookSerializer):
    secret = serializers.CharField(help_text="whsec_...: shown only in this answer.")

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]


class WebhookQuery(QuerySerializer):
    """No parameters but the page's."""


class DeliveryQuery(QuerySerializer):
    status = serializers.ChoiceField(choices=Delivery.Status.values, required=False)


class AttemptSerializer(serializers.ModelSerializer):
    class Meta:
        model = DeliveryAttempt
        fields = ["at", "status_code", "duration_ms", "error"]


class DeliverySerializer(serializers.ModelSerializer):
    kind = serializers.CharField(source="event.kind")
    attempts = AttemptSerializer(source="attempt_log", many=True)

    class Meta:
        model = Delivery
        fields = ["id", "event_id", "kind", "status", "attempts"]
