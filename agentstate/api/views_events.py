"""``GET /api/events/``: the audit trail, limited to what the caller may see."""

from typing import Any

from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.response import Response

from agentstate.models import Event

from . import serializers_events as s
from .base import AgentStateAPIView
from .permissions import has_model_perm
from .schema import documented


def visible_events(user: Any) -> QuerySet[Event]:
    """Events about objects the user created or owns, or of a model it may view.

    ``view_event`` shows every event. ``created_by`` and ``owner`` are copied
    onto the event, so the trail stays visible after its object is gone.
    """
    events = Event.objects.select_related("user", "created_by")
    if has_model_perm(user, "view_event"):
        return events
    viewable = [name for name in s.object_types() if has_model_perm(user, f"view_{name}")]
    return events.filter(
        Q(created_by=user) | Q(owner=user.get_username()) | Q(object_type__in=viewable)
    )


class EventsView(AgentStateAPIView):
    @documented(
        parameters=[
            s.EventQuery,
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int),
        ],
        responses=s.EventSerializer(many=True),
        operation_id="events_list",
    )
    def get(self, request: Request) -> Response:
        q = self.query(s.EventQuery)
        events = visible_events(request.user).filter(**q)
        return self.paginate(events.order_by("-created_at", "-pk"), s.EventSerializer)
