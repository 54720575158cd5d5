"""Fixtures of the client's tests: clients of a live server, a failing relay transport.

The server is pytest-django's ``live_server`` running the app on the test
settings (``tests/settings.py``) and database; the users come from the
suite's own fixtures (``tests/conftest.py``).
"""

import socket

import httpx
import pytest
from rest_framework.authtoken.models import Token

from agentstate_client import AgentStateClient
from tests.conftest import alice, api_for, bob, make_user  # noqa: F401 - fixtures


@pytest.fixture
def remote(live_server):
    """``remote(user)``: a client for ``user`` (token auth; ``basic=True`` for basic)."""
    made: list[AgentStateClient] = []

    def make(user=None, *, basic: bool = False, **options) -> AgentStateClient:
        options.setdefault("backoff", 0)
        if user is not None and basic:
            options["auth"] = (user.get_username(), "pw")
        elif user is not None:
            options["token"] = Token.objects.get_or_create(user=user)[0].key
        client = AgentStateClient(live_server.url + "/api/", **options)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def ac(remote, alice) -> AgentStateClient:
    return remote(alice)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def relay():
    """``relay(fail)``: a transport failing with ``fail``'s items first, then reaching the server.

    Returns the transport and the list of requests it saw.
    """
    opened: list[httpx.HTTPTransport] = []

    def make(fail: list):
        real = httpx.HTTPTransport()
        opened.append(real)
        seen: list[str] = []

        def handle(request: httpx.Request) -> httpx.Response:
            seen.append(f"{request.method} {request.url.path}")
            if fail:
                outcome = fail.pop(0)
                if isinstance(outcome, Exception):
                    raise outcome
                return httpx.Response(
                    outcome,
                    json={"detail": "down", "code": "unavailable"},
                    headers={"Retry-After": "0"},
                )
            return real.handle_request(request)

        return httpx.MockTransport(handle), seen

    yield make
    for transport in opened:  # open keep-alive sockets would hold the server's connections
        transport.close()
