import pytest
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token

from tests.hardening import database_env

from .servers import Uvicorn


@pytest.fixture
def agent(make_user):
    """A user that files requests, and its token."""
    user = make_user("agent")
    return user, Token.objects.create(user=user).key


@pytest.fixture
def reviewer(make_user):
    user = make_user("reviewer")
    user.user_permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
    return user, Token.objects.create(user=user).key


@pytest.fixture(scope="module")
def server(django_db_setup):
    """One uvicorn process for a module's tests, on the test database."""
    with Uvicorn(database_env()) as running:
        yield running


@pytest.fixture(autouse=True)
def _close_the_waiters_connection():
    """The waiters' thread keeps its connection; the test database must be droppable."""
    yield
    from agentstate.services import wakeups

    wakeups.close_connections()


@pytest.fixture
def quickly_idle(monkeypatch):
    """Hubs let go 0.3 s after their last waiter (``wakeups.IDLE_SECONDS``)."""
    from agentstate.services import wakeups

    monkeypatch.setattr(wakeups, "IDLE_SECONDS", 0.3)
    monkeypatch.setattr(wakeups, "IDLE_CHECK_SECONDS", 0.05)
