"""agentstate's REST API: ``path("api/", include("agentstate.api.urls"))``.

It needs the ``api`` extra (Django REST framework, drf-spectacular and its
sidecar, which serves Swagger UI and Redoc from the app itself). Without it,
importing anything here, the URLconf included, raises ``MissingExtra`` (an
``ImproperlyConfigured``) that names the extra. See docs/rest-api.md.
"""

import importlib

from agentstate.extras import missing

# Django REST framework first: the one a site is likeliest to lack.
for _module in ("rest_framework", "drf_spectacular", "drf_spectacular_sidecar"):
    try:
        importlib.import_module(_module)
    except ImportError as error:
        raise missing("api", "agentstate.api (the REST API)", error) from error
