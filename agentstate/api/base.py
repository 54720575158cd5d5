"""The base of every agentstate view: its own parser, renderer, errors,
permissions and schema, so the API behaves the same in any site. Only
authentication comes from the site's DRF settings.
"""

from rest_framework.renderers import JSONRenderer
from rest_framework.serializers import ListField
from rest_framework.views import APIView

from .errors import exception_handler
from .pagination import Pagination
from .parsers import BoundedJSONParser
from .permissions import IsAuthenticated
from .schema import AgentStateSchema


class AgentStateAPIView(APIView):
    parser_classes = [BoundedJSONParser]
    renderer_classes = [JSONRenderer]
    permission_classes = [IsAuthenticated]
    throttle_classes: list = []
    pagination_class = Pagination
    schema = AgentStateSchema()

    def get_exception_handler(self):
        return exception_handler

    def get_authenticate_header(self, request):
        # Always 401 for a missing or bad credential, even when the site's
        # first authenticator (session auth) offers no challenge.
        return super().get_authenticate_header(request) or 'Session realm="api"'

    def validated(self, serializer_class, data, **kwargs):
        serializer = serializer_class(data=data, context={"request": self.request, "view": self}, **kwargs)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def query(self, serializer_class):
        """Validated query parameters (lists for ``ListField`` entries)."""
        params = self.request.query_params
        data = {
            name: params.getlist(name) if isinstance(field, ListField) else params.get(name)
            for name, field in serializer_class().fields.items()
            if name in params
        }
        for name in params:
            data.setdefault(name, params.get(name))
        return self.validated(serializer_class, data)

    def paginate(self, queryset, serializer_class):
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(queryset, self.request, view=self)
        return paginator.get_paginated_response(serializer_class(page, many=True).data)

