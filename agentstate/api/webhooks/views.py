"""REST views over webhooks: managing them takes ``agentstate.change_webhook``."""

from typing import Any

from django.db.models import Prefetch
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from agentstate.models import Delivery, DeliveryAttempt, Webhook
from agentstate.services import webhooks

from ..access import require
from ..base import AgentStateAPIView, represent
from ..ids import path_id
from ..schema import PAGES, documented
from . import serializers as s

WEBHOOK_ID = OpenApiParameter("id", int, OpenApiParameter.PATH)


class WebhookPermissionMixin(AgentStateAPIView):
    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        require(
            request.user, "change_webhook", "Managing webhooks takes agentstate.change_webhook."
        )


def _webhook_pk(text: str) -> int:
    """The webhook id the path names (``path_id``); anything else names none."""
    pk = path_id(text)
    if pk is None:
        raise webhooks.WebhookNotFound(f"Webhook {text} not found.")
    return pk


class WebhooksView(WebhookPermissionMixin):
    @documented(
        parameters=PAGES, responses=s.WebhookSerializer(many=True), operation_id="webhooks_list"
    )
    def get(self, request: Request) -> Response:
        self.query(s.WebhookQuery)
        return self.paginate(Webhook.objects.order_by("pk"), s.WebhookSerializer)

    @documented(
        request=s.WebhookCreate,
        responses={201: s.CreatedWebhookSerializer},
        operation_id="webhooks_create",
    )
    def post(self, request: Request) -> Response:
        d = self.validated(s.WebhookCreate, request.data)
        hook = webhooks.create_webhook(d["url"], d.get("kinds"), d["active"], by=request.user)
        return Response(represent(s.CreatedWebhookSerializer, hook), status=status.HTTP_201_CREATED)


class WebhookView(WebhookPermissionMixin):
    @documented(parameters=[WEBHOOK_ID], responses={204: None}, operation_id="webhooks_delete")
    def delete(self, request: Request, id: str) -> Response:
        webhooks.delete_webhook(_webhook_pk(id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeliveriesView(WebhookPermissionMixin):
    @documented(
        parameters=[WEBHOOK_ID, s.DeliveryQuery, *PAGES],
        responses=s.DeliverySerializer(many=True),
        operation_id="webhooks_deliveries",
    )
    def get(self, request: Request, id: str) -> Response:
        q = self.query(s.DeliveryQuery)
        pk = _webhook_pk(id)
        if not Webhook.objects.filter(pk=pk).exists():
            raise webhooks.WebhookNotFound(f"Webhook {pk} not found.")
        rows = (
            Delivery.objects.filter(webhook_id=pk, **q)
            .select_related("event")
            .prefetch_related(
                Prefetch("attempt_log", queryset=DeliveryAttempt.objects.order_by("pk"))
            )
        )
        return self.paginate(rows.order_by("-pk"), s.DeliverySerializer)
