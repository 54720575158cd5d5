"""Redis restarted empty while webhook deliveries and resumes are queued: every
delivery is sent (one ``webhook-id`` each, its earlier attempts kept), every resume
runs once, and filing and deciding answer while Redis is down.

The Redis is the test's own. Its queued messages are: retries of deliveries whose
first attempt got a 500, first tries of new deliveries, and ``resume_run`` of
decided runs. Nothing consumes them (the worker is killed first); Redis is then
killed, more is filed and decided while it is down, and it starts again empty.
What the beat tasks find in the database (``send_webhooks``, ``resume_ready``,
every second here) is all that brings the work back.
"""

import time

import pytest

from agentstate.contrib import core
from agentstate.models import ApprovalRequest, Delivery, DeliveryAttempt, Run
from agentstate.services import approvals, context, runs, webhooks
from tests.faults.processes import figures, start_beat, start_worker, wait_until, worker_env
from tests.webhook_receiver import receiving

pytestmark = pytest.mark.django_db(transaction=True)

FIRST_FAILED = 3  # deliveries whose first attempt the receiver answers 500
QUEUED = 3  # deliveries and resumes queued in Redis when it dies
WHILE_DOWN = 3  # filed and decided while Redis is down


def bridged_run(mailer, run_id: str) -> ApprovalRequest:
    assert mailer.start("Email Bob.", run_id=run_id).status == core.WAITING
    return ApprovalRequest.objects.get(run__run_id=run_id)


def test_redis_restarted_empty_loses_no_delivery_and_no_resume(
    tmp_path, settings, redis, broker, mailer, alice
):
    settings.AGENTSTATE = {"WEBHOOK_ALLOW_PRIVATE": True}
    env = worker_env(tmp_path, redis.url, AGENTSTATE_WEBHOOK_BACKOFF="2")
    hook = webhooks.create_webhook("http://127.0.0.1:1/", ["approval.requested"])
    run = runs.create_run("hooked", user=alice)
    started = []
    with receiving(hook.secret, statuses=[500] * FIRST_FAILED) as receiver:
        hook.url = receiver.url
        hook.save(update_fields=["url"])
        try:
            # 1. first attempts answered 500: their retries wait in Redis
            worker = start_worker(tmp_path, "before", env)
            started.append(worker)
            for n in range(FIRST_FAILED):
                approvals.request_approval(run, "send_email", f"failed-{n}")
            # recorded, not only received: a worker killed between the receiver's answer
            # and the attempt's row would leave that attempt out of the log
            wait_until(
                lambda: DeliveryAttempt.objects.filter(status_code=500).count() >= FIRST_FAILED,
                "the first attempts",
                90,
                [worker],
            )
            worker.kill()
            # 2. deliveries and resumes queued with nobody consuming them
            for n in range(QUEUED):
                approvals.request_approval(run, "send_email", f"queued-{n}")
            for n in range(QUEUED):
                approvals.decide(bridged_run(mailer, f"queued-{n}"), "approve")
            time.sleep(1)  # the hand-off thread has published the deliveries
            # 3. Redis dies with all of it; filing and deciding go on
            redis.kill()
            latencies = []
            for n in range(WHILE_DOWN):
                began = time.monotonic()
                approvals.request_approval(run, "send_email", f"down-{n}")
                request = bridged_run(mailer, f"down-{n}")
                approvals.decide(request, "approve")
                latencies.append(time.monotonic() - began)
            # 4. Redis back, empty; a worker and beat
            redis.start()
            back = time.monotonic()
            started.append(start_worker(tmp_path, "after", env))
            started.append(start_beat(tmp_path, env))
            wait_until(lambda: "ready." in started[-2].log_tail(), "the worker", 120, started[1:])
            ready = time.monotonic()
            resumed = [f"queued-{n}" for n in range(QUEUED)] + [
                f"down-{n}" for n in range(WHILE_DOWN)
            ]

            def done() -> bool:
                return not Delivery.objects.exclude(
                    status=Delivery.Status.DELIVERED
                ).exists() and all(
                    context.get_state(core.STATE_SCOPE, run_id) is None
                    and Run.objects.get(run_id=run_id).requests == 2
                    for run_id in resumed
                )

            wait_until(done, "every delivery and resume after the restart", 180, started[1:])
            recovered_in, worker_ready_in = time.monotonic() - ready, ready - back
        finally:
            for process in started:
                process.kill()

    deliveries = list(Delivery.objects.order_by("pk"))
    # a bridged run files a request too: one more delivery each
    assert len(deliveries) == FIRST_FAILED + 2 * QUEUED + 2 * WHILE_DOWN
    for delivery in deliveries:
        ids = {
            b["webhook-id"]
            for b in receiver.received
            if b["data"]["object_id"] == str(delivery.event.object_id)
        }
        assert ids == {webhooks.message_id(delivery)}, ids
        codes = [a.status_code for a in delivery.attempt_log.order_by("pk")]
        expected = [500, 200] if delivery.event.details["call_id"].startswith("failed") else [200]
        assert codes == expected, (delivery.event.details, codes)
    assert receiver.refused == 0
    sent = context.get_state("bridged", "sent")
    assert sent == ["bob@example.com"] * len(resumed), "a resume ran twice or not at all"
    assert all(Run.objects.get(run_id=r).total_tokens == 28 for r in resumed)
    figures(
        "redis-restarted",
        deliveries=len(deliveries),
        delivered=sum(d.status == Delivery.Status.DELIVERED for d in deliveries),
        posts_received=len(receiver.received),
        resumes=len(resumed),
        resumed_once=sent.count("bob@example.com"),
        lost=0,
        doubled=len(sent) - len(resumed),
        slowest_call_while_down_s=round(max(latencies), 2),
        worker_ready_after_restart_s=round(worker_ready_in, 1),
        all_done_after_worker_ready_s=round(recovered_in, 1),
    )
