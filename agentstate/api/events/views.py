"""``GET /api/events/``: the audit trail, limited to what the caller may see."""

from rest_framework.request import Request
from rest_framework.response import Response

from ..access import visible_events
from ..base import AgentStateAPIView
from ..schema import PAGES, documented
from . import serializers as s


class EventsView(AgentStateAPIView):
    @documented(
        parameters=[
            s.EventQuery,
            *PAGES,
        ],
        responses=s.EventSerializer(many=True),
        operation_id="events_list",
    )
    def get(self, request: Request) -> Response:
        q = self.query(s.EventQuery)
        events = visible_events(request.user).select_related("user", "created_by").filter(**q)
        return self.paginate(events.order_by("-created_at", "-pk"), s.EventSerializer)
