"""The backends' contract: every test in this folder runs once per storage backend
that the database under test supports.

PostgreSQL: its own backend and the portable one; SQLite, MySQL and MariaDB:
the portable one. A backend forced for the whole run (``AGENTSTATE_BACKEND``)
is the only one.
"""

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils.module_loading import import_string

from agentstate.backends import BY_VENDOR, PORTABLE, backend

# Django's vendor of each engine that has a backend of its own
VENDORS = {"django.db.backends.postgresql": "postgresql"}


def backends() -> list[str]:
    """The dotted paths of the backends of the database under test."""
    forced = settings.AGENTSTATE.get("BACKEND")
    if forced:
        return [forced]
    own = BY_VENDOR.get(VENDORS.get(settings.DATABASES["default"]["ENGINE"], ""))
    return [own, PORTABLE] if own else [PORTABLE]


@pytest.fixture(autouse=True, params=backends(), ids=lambda path: path.rsplit(".", 1)[-1])
def contract_backend(request):
    """The backend of this run of the test, for every thread and process it starts."""
    with override_settings(AGENTSTATE={**settings.AGENTSTATE, "BACKEND": request.param}):
        assert type(backend()) is import_string(request.param)
        yield request.param
