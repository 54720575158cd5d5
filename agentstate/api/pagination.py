"""Pages of a listing in one query: the rows and, beside each, the total (a window count).

DRF's ``PageNumberPagination`` asks the database twice, ``COUNT(*)`` and then
the page; here the page's query carries ``COUNT(*) OVER ()``, so a listing
costs one round trip. An empty page needs no count: on page 1 the total is
0, past it the page does not exist (404, as DRF answers).
"""

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from rest_framework.exceptions import NotFound
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.views import APIView

from agentstate.conf import agentstate_settings
from agentstate.db import window_page
from agentstate.exceptions import BadInput

# A page's rows and the listing's total from ``(offset, limit)``.
Fetch = Callable[[int, int], tuple[list[Any], int]]


class Pagination(PageNumberPagination):
    """``{"count", "next", "previous", "results"}``, sized by ``AGENTSTATE``."""

    page_size_query_param = "page_size"
    # Set by ``paginate_queryset`` before any link is made.
    request: Request

    def get_page_size(self, request: Request) -> int:
        """``?page_size=``, a whole number from 1 (above ``MAX_PAGE_SIZE``: that many),
        else ``PAGE_SIZE``. Anything else is bad input, where DRF's would take the
        default page size without a word."""
        text = request.query_params.get(self.page_size_query_param)
        if text is None or text == "":
            return agentstate_settings.PAGE_SIZE
        digits, limit = text.lstrip("0"), agentstate_settings.MAX_PAGE_SIZE
        if not (text.isascii() and text.isdigit() and digits):
            raise BadInput(
                f"{self.page_size_query_param}: must be a whole number from 1.",
                field=self.page_size_query_param,
            )
        # a number longer than the limit is above it (and int() refuses thousands of digits)
        return limit if len(digits) > len(str(limit)) else min(int(digits), limit)

    # Only a queryset, not any sequence: the total is counted by the page's own query.
    def paginate_queryset(  # type: ignore[override]
        self, queryset: QuerySet[Any], request: Request, view: APIView | None = None
    ) -> list[Any]:
        return self.paginate_fetched(
            lambda offset, limit: window_page(queryset, offset, limit), request
        )

    def paginate_fetched(self, fetch: Fetch, request: Request) -> list[Any]:
        """The page the request asks for, its rows and the listing's total read by
        ``fetch(offset, limit)`` (one query, whose empty page needs no count)."""
        self.request = request
        size = self.get_page_size(request)
        text = request.query_params.get(self.page_query_param) or "1"
        number = int(text) if text.isascii() and text.isdigit() else 0
        if not 1 <= number <= 2**31:
            raise NotFound(self.invalid_page_message.format(page_number=text, message=""))
        rows, total = fetch((number - 1) * size, size)
        if not rows and number > 1:
            raise NotFound(
                self.invalid_page_message.format(page_number=text, message="That page is empty.")
            )
        self.number, self.size = number, size
        self.count = total
        return rows

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "count": self.count,
                "next": self.get_next_link(),
                "previous": self.get_previous_link(),
                "results": data,
            }
        )

    def get_next_link(self) -> str | None:
        if self.number * self.size >= self.count:
            return None
        url = self.request.build_absolute_uri()
        return replace_query_param(url, self.page_query_param, self.number + 1)

    def get_previous_link(self) -> str | None:
        if self.number == 1:
            return None
        url = self.request.build_absolute_uri()
        if self.number == 2:
            return remove_query_param(url, self.page_query_param)
        return replace_query_param(url, self.page_query_param, self.number - 1)
