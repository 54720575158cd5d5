"""The REST client's waits against uvicorn: ``wait_for_decision`` and
``follow_events`` (sync and async), which reconnects and resumes after a lost
connection with nothing lost or repeated."""

import asyncio
import threading
import time

import httpx
import pytest
from django.db import connection

from agentstate.models import Event
from agentstate.services import approvals, runs
from agentstate_client import AgentStateClient, AsyncAgentStateClient

pytestmark = pytest.mark.django_db(transaction=True)


class Flaky(httpx.HTTPTransport):
    """Every third request fails before it reaches the server."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        if self.sent % 3 == 0:
            raise httpx.ConnectError("cut", request=request)
        return super().handle_request(request)


def file_slowly(user, count: int) -> threading.Thread:
    def file() -> None:
        for i in range(count):
            approvals.request_approval("client", "send", f"c{i}", by=user)
            time.sleep(0.1)
        connection.close()

    thread = threading.Thread(target=file)
    thread.start()
    return thread


def test_wait_for_decision_and_follow_events(server, agent, reviewer):
    user, token = agent
    runs.create_run("client", user=user)
    filed = approvals.request_approval("client", "send", "first", by=user)
    api = f"{server.url}/api/"
    with AgentStateClient(api, token=token) as client:
        assert client.wait_for_decision(filed.pk, 0.2)["status"] == "pending"
        threading.Timer(0.5, lambda: approvals.decide(filed.pk, "reject", by=reviewer[0])).start()
        started = time.monotonic()
        assert client.wait_for_decision(filed.pk, 20)["status"] == "rejected"
        assert time.monotonic() - started < 2
    connection.close()
    with AgentStateClient(api, token=token, transport=Flaky(), retries=0, backoff=0.01) as client:
        start = Event.objects.order_by("-pk").values_list("pk", flat=True).first()
        writer = file_slowly(user, 12)
        followed = []
        for event in client.follow_events(
            after=start, run_id="client", kind="approval.requested", timeout=30
        ):
            followed.append(event)
            if len(followed) == 12:
                break
        writer.join()
    assert [e["details"]["call_id"] for e in followed] == [f"c{i}" for i in range(12)]


def test_the_async_client(server, agent, reviewer):
    user, token = agent
    runs.create_run("client", user=user)
    filed = approvals.request_approval("client", "send", "first", by=user)
    connection.close()

    async def main():
        async with AsyncAgentStateClient(f"{server.url}/api/", token=token) as client:
            timer = threading.Timer(
                0.5, lambda: approvals.decide(filed.pk, "approve", by=reviewer[0])
            )
            timer.start()
            decided = await client.wait_for_decision(filed.pk, 20)
            events = [
                event async for event in client.follow_events(after=0, run_id="client", timeout=1)
            ]
            return decided, events

    decided, events = asyncio.run(main())
    assert decided["status"] == "approved"
    assert [e["kind"] for e in events] == [
        "approval.requested",
        "approvals.changed",
        "approval.decided",
    ] or [e["kind"] for e in events] == [
        "approval.requested",
        "approval.decided",
        "approvals.changed",
    ]
