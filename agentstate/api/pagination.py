from rest_framework.pagination import PageNumberPagination

from agentstate.conf import agentstate_settings


class Pagination(PageNumberPagination):
    """``{"count", "next", "previous", "results"}``, sized by ``AGENTSTATE``."""

    page_size_query_param = "page_size"

    def get_page_size(self, request):
        self.page_size = agentstate_settings.PAGE_SIZE
        self.max_page_size = agentstate_settings.MAX_PAGE_SIZE
        return super().get_page_size(request)
