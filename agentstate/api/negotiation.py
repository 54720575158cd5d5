"""Content negotiation that no site setting changes.

DRF's own negotiation, whatever the site's ``DEFAULT_CONTENT_NEGOTIATION_CLASS``,
with a format asked for by ``?format=`` whatever its ``URL_FORMAT_OVERRIDE``: the
schema's ``?format=json`` (which the docs pages load) and the event stream's
``?format=sse`` are the same in every site.
"""

from typing import Any, cast

from rest_framework.negotiation import DefaultContentNegotiation
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
