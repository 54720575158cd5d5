"""The OpenAPI 3 schema of agentstate's own endpoints, and Swagger UI over it.

Both work in a site that only adds ``agentstate`` to ``INSTALLED_APPS``
(no ``drf_spectacular`` app, no template settings needed).
"""

from django.http import HttpResponse
from django.urls import reverse
from django.utils.html import escape
from django.views import View
from drf_spectacular.views import SpectacularAPIView

import agentstate

from .errors import exception_handler


def only_agentstate_endpoints(endpoints, **kwargs):
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
}


class SchemaView(SpectacularAPIView):
    custom_settings = SCHEMA_SETTINGS
    serve_public = True
    # Like the API's own views: no site-wide versioning, throttling or handler.
    versioning_class = None
    throttle_classes: list = []

    def get_exception_handler(self):
        return exception_handler


SWAGGER_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>agentstate API</title>
<link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css">
</head><body><div id="swagger-ui"></div>
<script src="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"></script>
<script>
SwaggerUIBundle({url: "%(schema_url)s", dom_id: "#swagger-ui", withCredentials: true,
  requestInterceptor: (r) => { const m = document.cookie.match(/csrftoken=([^;]+)/);
    if (m) { r.headers["X-CSRFToken"] = m[1]; } return r; }});
</script>
<noscript>The schema itself is at <a href="%(schema_url)s">%(schema_url)s</a>.</noscript>
</body></html>"""


class DocsView(View):
    def get(self, request):
        schema_url = escape(reverse("agentstate:schema") + "?format=json")
        return HttpResponse(SWAGGER_HTML % {"schema_url": schema_url})
