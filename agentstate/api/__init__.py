"""agentstate's REST API: ``path("api/", include("agentstate.api.urls"))``.

It needs the ``api`` extra (Django REST framework, drf-spectacular and its
sidecar, which serves Swagger UI and Redoc from the app itself). Without it,
importing anything here, the URLconf included, raises ``MissingExtra`` (an
``ImproperlyConfigured``) that names the extra. See docs/rest-api.md.
"""

from agentstate.extras import missing

try:
    import drf_spectacular  # noqa: F401
    import drf_spectacular_sidecar  # noqa: F401
    import rest_framework  # noqa: F401
except ImportError as error:
    raise missing("api", "agentstate.api (the REST API)", error) from error
