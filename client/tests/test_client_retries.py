"""The synchronous and the asynchronous client repeat, wait and refuse alike: one
retry policy (``agentstate_client.common.ClientBase``), two transports. A mock
transport answers, so no server is started."""

import asyncio
import logging

import httpx
import pytest

from agentstate_client import (
    AgentStateClient,
    ApprovalRequestNotFound,
    AsyncAgentStateClient,
    ServiceUnavailable,
    Unreachable,
)

REQUEST = {"id": 7, "status": "pending"}
BODIES = {
    200: REQUEST,
    404: {"code": "not_found", "detail": "No such request."},
    503: {"code": "unavailable", "detail": "The database is unreachable."},
}


def scripted(outcomes: list):
    """A mock transport answering each request with the next of ``outcomes`` (a status,
    or an exception to raise), the last one for ever after; and the list it saw."""
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        outcome = outcomes[min(len(seen), len(outcomes)) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return httpx.Response(outcome, json=BODIES[outcome], headers={"Retry-After": "1"})

    return httpx.MockTransport(answer), seen


def sync_get(transport, **options):
    with AgentStateClient("http://agentstate.test/api", transport=transport, **options) as client:
        return client.get_approval_request(7)


def async_get(transport, **options):
    async def get():
        async with AsyncAgentStateClient(
            "http://agentstate.test/api", transport=transport, **options
        ) as client:
            return await client.get_approval_request(7)

    return asyncio.run(get())


both = pytest.mark.parametrize("get", [sync_get, async_get], ids=["sync", "async"])


@both
def test_a_read_is_repeated_on_a_503_and_a_lost_answer(get, caplog):
    transport, seen = scripted([503, httpx.ReadError("reset"), 200])
    with caplog.at_level(logging.INFO, logger="agentstate_client.client"):
        assert get(transport, backoff=0, max_backoff=0) == REQUEST
    assert seen == ["GET /api/approval-requests/7/"] * 3
    assert caplog.text.count("agentstate: retrying in") == 2


@both
def test_the_repeats_are_bounded(get):
    transport, seen = scripted([503])
    with pytest.raises(ServiceUnavailable) as caught:
        get(transport, retries=2, backoff=0, max_backoff=0)
    assert (caught.value.status, len(seen)) == (503, 3)
    transport, seen = scripted([httpx.ConnectError("refused")])
    with pytest.raises(Unreachable, match="GET approval-requests/7/: refused"):
        get(transport, retries=1, backoff=0)
    assert len(seen) == 2


@both
def test_a_refusal_is_its_error_at_once(get):
    transport, seen = scripted([404])
    with pytest.raises(ApprovalRequestNotFound, match="No such request."):
        get(transport)
    assert len(seen) == 1


@pytest.mark.parametrize("client", [AgentStateClient, AsyncAgentStateClient])
def test_token_and_auth_together_are_refused(client):
    with pytest.raises(ValueError, match="token or auth"):
        client("http://agentstate.test/api/", token="t", auth=("u", "p"))
