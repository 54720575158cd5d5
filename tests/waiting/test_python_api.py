"""``approvals.wait`` and ``await approvals.await_decision``: woken by a decision
made on another thread, answered at once for a decided request, pending after the
timeout; ``wait_run_decided`` once none of a run's requests is pending."""

import asyncio
import threading
import time

import pytest
from django.db import connection

from agentstate.exceptions import ApprovalRequestNotFound, BadInput
from agentstate.services import approvals, runs

pytestmark = pytest.mark.django_db(transaction=True)


def decide_later(pk: int, user, delay: float = 0.5) -> threading.Thread:
    def decide() -> None:
        time.sleep(delay)
        approvals.decide(pk, "approve", by=user)
        connection.close()

    thread = threading.Thread(target=decide)
    thread.start()
    return thread


def test_wait_returns_on_a_decision_and_pending_after_the_timeout(make_user):
    user = make_user("agent")
    run = runs.create_run("py", user=user)
    filed = approvals.request_approval(run, "send", "c1", by=user)
    started = time.monotonic()
    assert approvals.wait(filed.pk, 0.3).current_status == "pending"
    assert time.monotonic() - started >= 0.3
    decider = decide_later(filed.pk, user)
    started = time.monotonic()
    decided = approvals.wait(filed, 20)
    decider.join()
    assert decided.status == "approved" and decided.decided_by == user
    assert time.monotonic() - started < 2
    started = time.monotonic()
    assert approvals.wait(filed.pk, 20).status == "approved"  # at once
    assert time.monotonic() - started < 1


def test_await_decision_and_the_run_wait(make_user):
    user = make_user("agent")
    run = runs.create_run("py-async", user=user)
    first = approvals.request_approval(run, "send", "c1", by=user)
    second = approvals.request_approval(run, "send", "c2", by=user)

    async def main():
        decider = decide_later(first.pk, user)
        decided = await approvals.await_decision(first.pk, 20)
        decider.join()
        assert decided.status == "approved"
        waiting = asyncio.ensure_future(approvals.await_run_decided(run, 20))
        await asyncio.sleep(0.5)
        assert not waiting.done()  # the second is pending
        decide_later(second.pk, user, 0).join()
        return await waiting

    requests = asyncio.run(main())
    assert [(r.call_id, r.status) for r in requests] == [("c1", "approved"), ("c2", "approved")]
    assert approvals.wait_run_decided(run, 0)[1].status == "approved"


def test_bad_waits():
    with pytest.raises(ApprovalRequestNotFound):
        approvals.wait(10**6, 0.1)
    with pytest.raises(BadInput):
        approvals.wait(1, -1)
