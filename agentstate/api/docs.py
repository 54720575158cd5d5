"""The OpenAPI 3 schema of agentstate's own endpoints, and Swagger UI and Redoc over it.

All three work in a site that only adds ``agentstate`` to ``INSTALLED_APPS``
(no ``drf_spectacular`` app, no template or static files settings needed),
and on a machine without internet access. See docs/rest-api.md.
"""

import mimetypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

import drf_spectacular_sidecar
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.cache import patch_cache_control
from django.utils.html import escape
from django.views import View
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle

import agentstate

from .errors import exception_handler
from .negotiation import ContentNegotiation

# drf-spectacular's (path, path regex, method, view) of an endpoint
Endpoint = tuple[str, str, str, Callable[..., Any]]


def only_agentstate_endpoints(endpoints: list[Endpoint], **kwargs: Any) -> list[Endpoint]:
    from .base import AgentStateAPIView

    return [
        (path, pattern, method, callback)
        for path, pattern, method, callback in endpoints
        if issubclass(getattr(callback, "cls", object), AgentStateAPIView)
    ]


SCHEMA_SETTINGS = {
    "TITLE": "agentstate API",
    "DESCRIPTION": "Durable, exactly-once state for AI-agent runs: context variables, "
    "paused runs, runs with usage and tool-call approvals.",
    "VERSION": agentstate.__version__,
    "PREPROCESSING_HOOKS": ["agentstate.api.docs.only_agentstate_endpoints"],
    "COMPONENT_SPLIT_REQUEST": True,
    # Each status its own name: without them, the requests' status was "StatusA60Enum",
    # with a warning printed at every generation (three models have a "status").
    "ENUM_NAME_OVERRIDES": {
        "ApprovalRequestStatusEnum": "agentstate.models.choices.RequestStatus",
        "PauseStatusEnum": "agentstate.models.choices.PauseStatus",
        "DeliveryStatusEnum": "agentstate.models.choices.DeliveryStatus",
    },
}


class SchemaView(SpectacularAPIView):
    custom_settings = SCHEMA_SETTINGS
    serve_public = True
    # Like the API's own views: no site-wide versioning, throttling, handler or
    # format parameter.
    content_negotiation_class = ContentNegotiation
    versioning_class = None
    throttle_classes: list[type[BaseThrottle]] = []

    def get_exception_handler(self) -> Callable[..., Response | None]:
        return exception_handler


# The pages load Swagger UI and Redoc from the drf-spectacular-sidecar
# package through AssetView: nothing is fetched from another host, so the
# pages work on a machine without internet access.
SIDECAR = (
    Path(drf_spectacular_sidecar.__file__).resolve().parent / "static" / "drf_spectacular_sidecar"
)
ASSETS = {
    "swagger-ui.css": "swagger-ui-dist/swagger-ui.css",
    "swagger-ui-bundle.js": "swagger-ui-dist/swagger-ui-bundle.js",
    "favicon-32x32.png": "swagger-ui-dist/favicon-32x32.png",
    "redoc.standalone.js": "redoc/bundles/redoc.standalone.js",
}
ASSET_MAX_AGE = 7 * 24 * 3600
# Nothing from another host: Redoc's own "by Redocly" logo is not fetched.
PAGE_POLICY = "default-src 'self' 'unsafe-inline' data: blob:"

SWAGGER_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>agentstate API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" type="image/png" href="%(favicon)s">
<link rel="stylesheet" href="%(css)s">
</head><body><div id="swagger-ui"></div>
<script src="%(js)s"></script>
<script>
SwaggerUIBundle({url: "%(schema_url)s", dom_id: "#swagger-ui", withCredentials: true,
  requestInterceptor: (r) => { const m = document.cookie.match(/csrftoken=([^;]+)/);
    if (m) { r.headers["X-CSRFToken"] = m[1]; } return r; }});
</script>
<noscript>The schema itself is at <a href="%(schema_url)s">%(schema_url)s</a>.</noscript>
</body></html>"""

REDOC_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>agentstate API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" type="image/png" href="%(favicon)s">
</head><body><redoc spec-url="%(schema_url)s"></redoc>
<script src="%(js)s"></script>
<noscript>The schema itself is at <a href="%(schema_url)s">%(schema_url)s</a>.</noscript>
</body></html>"""


def _page(html: str) -> HttpResponse:
    response = HttpResponse(html)
    response["Content-Security-Policy"] = PAGE_POLICY
    return response


def _asset(name: str) -> str:
    return escape(reverse("agentstate:docs-asset", args=[name]))


def _schema_url() -> str:
    return escape(reverse("agentstate:schema") + "?format=json")


class DocsView(View):
    """Swagger UI over the schema: ``/api/docs/``."""

    def get(self, request: HttpRequest) -> HttpResponse:
        return _page(
            SWAGGER_HTML
            % {
                "schema_url": _schema_url(),
                "css": _asset("swagger-ui.css"),
                "js": _asset("swagger-ui-bundle.js"),
                "favicon": _asset("favicon-32x32.png"),
            }
        )


class RedocView(View):
    """Redoc over the schema: ``/api/redoc/``."""

    def get(self, request: HttpRequest) -> HttpResponse:
        return _page(
            REDOC_HTML
            % {
                "schema_url": _schema_url(),
                "js": _asset("redoc.standalone.js"),
                "favicon": _asset("favicon-32x32.png"),
            }
        )


class AssetView(View):
    """One of the few sidecar files the two pages load, cached by browsers for a week.

    Served by the app so that a site needs neither ``django.contrib.staticfiles``
    nor the sidecar in ``INSTALLED_APPS``; any other name answers 404.
    """

    def get(self, request: HttpRequest, name: str) -> FileResponse:
        if name not in ASSETS:
            raise Http404("No such asset.")
        path = SIDECAR / ASSETS[name]
        response = FileResponse(path.open("rb"), content_type=mimetypes.guess_type(path.name)[0])
        patch_cache_control(response, public=True, max_age=ASSET_MAX_AGE)
        return response
