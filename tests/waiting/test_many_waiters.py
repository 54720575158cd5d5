"""One uvicorn process holds 500 waiters with at most 2 database connections for
them (counted in pg_stat_activity), wakes them all when their requests are
decided, and its ordinary sync views leave no connection behind.

The server's connections are told apart by their application name (``PGAPPNAME``
in its environment): this test's process may hold connections of its own to the
same database, such as the waiters' thread of an earlier in-process test, which
keeps its connection open by design."""

import asyncio
import threading
import time

import httpx
import pytest
from django.db import connection

from agentstate.services import approvals, runs

from .servers import Uvicorn, call

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # connections counted in pg_stat_activity, of a direct connection
    pytest.mark.postgres_only,
    pytest.mark.direct_only,
]

WAITERS = 500
REQUESTS = 10
SERVER = "agentstate-many-waiters"  # the server's connections' application name


def server_connections() -> int:
    """The server's connections to the test database."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            [SERVER],
        )
        return cursor.fetchone()[0]


async def wait_all(url: str, token: str, ids: list[int]) -> list:
    limits = httpx.Limits(max_connections=WAITERS + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Token {token}"}, limits=limits, timeout=120
    ) as client:

        async def one(pk: int) -> tuple[int, str, float, int]:
            response = await client.get(f"/api/approval-requests/{pk}/", params={"wait": 60})
            return response.status_code, response.json().get("status"), time.monotonic(), pk

        tasks = [asyncio.create_task(one(ids[i % len(ids)])) for i in range(WAITERS)]
        return await asyncio.gather(*tasks)


def test_500_waiters_on_one_process_use_at_most_two_connections(make_user, reviewer):
    reviewing, _ = reviewer
    from rest_framework.authtoken.models import Token

    from tests.hardening import database_env

    user = make_user("agent")
    token = Token.objects.create(user=user).key
    runs.create_run("many", user=user)
    ids = [approvals.request_approval("many", "send", f"c{i}", by=user).pk for i in range(REQUESTS)]
    with Uvicorn(database_env(), PGAPPNAME=SERVER) as server:
        # The ordinary sync views: a burst of 20 requests leaves nothing behind.
        for _ in range(20):
            assert call(server.url, token, "/api/runs/many/")[0] == 200
            assert call(server.url, token, "/api/approval-requests/?status=pending")[0] == 200
        time.sleep(0.5)
        after_burst = server_connections()
        assert after_burst <= 2, after_burst

        # The waiters, on a loop of their own (answers are timed as they arrive).
        results: list = []
        client = threading.Thread(
            target=lambda: results.append(asyncio.run(wait_all(server.url, token, ids)))
        )
        client.start()
        # Every waiter has arrived and waits once a probe behind them answers quickly
        # (the waiters' first reads are queued on one thread, first come first served).
        time.sleep(3)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            started = time.monotonic()
            assert call(server.url, token, f"/api/approval-requests/{ids[0]}/?wait=0.1")[0] == 200
            if time.monotonic() - started < 0.5:
                break
        assert client.is_alive() and not results
        peak = server_connections()
        decided_at = {}
        for pk in ids:
            approvals.decide(pk, "approve", by=reviewing)
            decided_at[pk] = time.monotonic()
        client.join(60)
        (answers,) = results
        # at least the listener's: the server's connections are the ones counted
        assert 1 <= peak <= 2, peak
        assert [answer[0] for answer in answers] == [200] * WAITERS
        assert {answer[1] for answer in answers} == {"approved"}
        latencies = sorted(at - decided_at[pk] for _, _, at, pk in answers)
        print(
            f"500 waiters: peak {peak} connections; wake-up p50 {latencies[WAITERS // 2]:.3f}s, max {latencies[-1]:.3f}s"
        )
        # 50 waiters per request, all woken by one NOTIFY each, and answered. (The
        # latency of one waiter is test_long_poll's; here 500 answers are read by
        # one client thread of this process.)
        assert latencies[-1] < 15, latencies[:: WAITERS // 10]
        time.sleep(0.5)
        assert server_connections() <= 2
