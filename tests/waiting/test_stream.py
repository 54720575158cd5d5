"""``/api/events/stream/``: Server-Sent Events from uvicorn, resumed after a
disconnect with ``Last-Event-ID`` with nothing lost and nothing repeated."""

import json
import threading
import time

import httpx
import pytest

from agentstate.models import Event
from agentstate.services import approvals, runs

pytestmark = pytest.mark.django_db(transaction=True)


def read_events(response: httpx.Response, count: int, timeout: float = 20) -> list[dict]:
    """``count`` events from an open stream: each ``id:``, ``event:`` and ``data:``."""
    events, current = [], {}
    deadline = time.monotonic() + timeout
    for line in response.iter_lines():
        assert time.monotonic() < deadline, events
        if line.startswith(":") or line.startswith("retry:"):
            continue
        if not line:
            if current:
                events.append(current)
                current = {}
                if len(events) == count:
                    return events
            continue
        name, _, value = line.partition(": ")
        current[name] = value
    raise AssertionError(f"the stream ended after {events}")


def file_later(user, names: list[str], delay: float = 0.5) -> threading.Thread:
    def file() -> None:
        from django.db import connection

        time.sleep(delay)
        for name in names:
            approvals.request_approval("streamed", "send", name, by=user)
        connection.close()

    thread = threading.Thread(target=file)
    thread.start()
    return thread


def test_a_stream_resumes_after_a_disconnect_with_nothing_lost_or_repeated(server, agent):
    user, token = agent
    runs.create_run("streamed", user=user)
    headers = {"Authorization": f"Token {token}", "Accept": "text/event-stream"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
        # Without after: from the next event on.
        approvals.request_approval("streamed", "send", "before", by=user)
        writer = file_later(user, ["a", "b", "c"])
        with client.stream("GET", "/api/events/stream/") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            first = read_events(response, 2)
        writer.join()
        assert [json.loads(e["data"])["details"]["call_id"] for e in first] == ["a", "b"]
        assert {e["event"] for e in first} == {"approval.requested"}
        assert [int(e["id"]) for e in first] == [json.loads(e["data"])["id"] for e in first]
        # Disconnected; more are filed; Last-Event-ID (over after=0) resumes.
        writer = file_later(user, ["d", "e"], delay=0)
        writer.join()
        resumed_headers = {"Last-Event-ID": first[-1]["id"]}
        with client.stream(
            "GET", "/api/events/stream/?after=0", headers=resumed_headers
        ) as response:
            rest = read_events(response, 3)
    assert [json.loads(e["data"])["details"]["call_id"] for e in rest] == ["c", "d", "e"]
    ids = [int(e["id"]) for e in first + rest]
    assert ids == sorted(ids) and len(set(ids)) == 5
    assert ids == list(
        Event.objects.filter(pk__gte=ids[0]).order_by("pk").values_list("pk", flat=True)
    )


def test_a_stream_takes_authentication_and_refuses_a_bad_resume(server, agent):
    _, token = agent
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.get("/api/events/stream/").status_code in (401, 403)
        response = client.get(
            "/api/events/stream/",
            headers={"Authorization": f"Token {token}", "Last-Event-ID": "x"},
        )
        assert response.status_code == 400
        assert response.json()["field"] == "Last-Event-ID"
        response = client.get(
            "/api/events/stream/?after=-1", headers={"Authorization": f"Token {token}"}
        )
        assert response.status_code == 400 and response.json()["field"] == "after"
