"""Content negotiation that no site setting changes.

DRF's own negotiation, whatever the site's ``DEFAULT_CONTENT_NEGOTIATION_CLASS``,
with a format asked for by ``?format=`` whatever its ``URL_FORMAT_OVERRIDE``: the
schema's ``?format=json`` (which the docs pages load) and the event stream's
``?format=sse`` are the same in every site.
"""

from collections.abc import Iterable
from typing import Any, cast

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.settings import api_settings

# The query parameter that picks a view's renderer by its format.
FORMAT_PARAMETER = "format"


class _Settings:
    """The site's DRF settings, but for the format's query parameter."""

    URL_FORMAT_OVERRIDE = FORMAT_PARAMETER

    def __getattr__(self, name: str) -> Any:
        return getattr(api_settings, name)


class ContentNegotiation(DefaultContentNegotiation):
    settings = cast(Any, _Settings())

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        # A view of one renderer asked for anything, or for that renderer's media type,
        # without a format: that renderer, as DRF's negotiation would choose it, without
        # parsing the Accept header (most of the API's requests).
        if format_suffix is None and isinstance(renderers, list) and len(renderers) == 1:
            (renderer,) = renderers
            if request.META.get("HTTP_ACCEPT", "*/*") in ("*/*", renderer.media_type) and (
                FORMAT_PARAMETER not in request.query_params
            ):
                return renderer, renderer.media_type
        return cast(
            tuple[BaseRenderer, str], super().select_renderer(request, renderers, format_suffix)
        )
