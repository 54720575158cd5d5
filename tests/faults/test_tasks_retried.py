"""Celery tasks that meet the database unreachable are retried, not lost: webhook
deliveries and resumes queued while a real worker's database path is cut (a TCP
proxy of the test's own, stopped) are all done once it is back, with no beat
running: the tasks' own retries (``autoretry_for`` the database's errors, with
backoff) bring them back.

``AGENTSTATE_TASK_OUTAGE_SECONDS`` sets the outage (5).
"""

import os
import time

import pytest
from django.db import connection
from django.db.models.functions import Now

from agentstate.contrib import core
from agentstate.models import ApprovalRequest, Delivery, Run
from agentstate.services import approvals, context, runs, webhooks
from tests.faults.processes import figures, start_worker, wait_until, worker_env
from tests.faults.proxy import TcpProxy
from tests.webhook_receiver import receiving

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

DELIVERIES = 3
RESUMES = 3


def resumed(run_id: str) -> bool:
    return (
        Run.objects.get(run_id=run_id).requests == 2
        and context.get_state(core.STATE_SCOPE, run_id) is None
    )


def test_tasks_meeting_the_database_unreachable_are_retried_and_done_once_it_is_back(
    tmp_path, settings, redis, broker, mailer, alice
):
    seconds = float(os.environ.get("AGENTSTATE_TASK_OUTAGE_SECONDS", "5"))
    settings.AGENTSTATE = {"WEBHOOK_ALLOW_PRIVATE": True}
    db = connection.settings_dict
    proxy = TcpProxy(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432))
    proxy.start()
    env = worker_env(tmp_path, redis.url)
    env["DATABASE_URL"] = (
        f"postgres://{db['USER'] or 'postgres'}@127.0.0.1:{proxy.port}/{db['NAME']}"
    )
    hook = webhooks.create_webhook("http://127.0.0.1:1/", ["approval.requested"])
    run = runs.create_run("hooked", user=alice)
    run_ids = [f"down-{n}" for n in range(RESUMES)]
    for run_id in run_ids:
        assert mailer.start("Email Bob.", run_id=run_id).status == core.WAITING
    # the bridged runs' own
    Delivery.objects.update(status=Delivery.Status.DELIVERED, delivered_at=Now())
    worker = None
    with receiving(hook.secret) as receiver:
        hook.url = receiver.url
        hook.save(update_fields=["url"])
        try:
            worker = start_worker(tmp_path, "worker", env)
            wait_until(lambda: "ready." in worker.log_tail(), "the worker", 120, [worker])
            proxy.stop()  # the worker's database unreachable
            began = time.monotonic()
            for n in range(DELIVERIES):
                approvals.request_approval(run, "send_email", f"down-{n}")
            for run_id in run_ids:
                approvals.decide(ApprovalRequest.objects.get(run__run_id=run_id), "approve")
            wait_until(
                lambda: worker.log_tail().count("Retry in") >= DELIVERIES + RESUMES,
                "every task to meet the outage",
                60,
                [worker],
            )
            time.sleep(max(0.0, seconds - (time.monotonic() - began)))
            assert not receiver.received, "delivered while the database was unreachable"
            assert not any(resumed(run_id) for run_id in run_ids)
            retries_during = worker.log_tail().count("Retry in")
            proxy.start()
            back = time.monotonic()

            def done() -> bool:
                return not Delivery.objects.exclude(
                    status=Delivery.Status.DELIVERED
                ).exists() and all(map(resumed, run_ids))

            wait_until(done, "every delivery and resume after the outage", 180, [worker])
            done_in = time.monotonic() - back
            log = worker.log.read_text(errors="replace")
        finally:
            if worker is not None:
                worker.kill()
            proxy.stop()
    deliveries = Delivery.objects.filter(event__details__call_id__startswith="down-")
    assert deliveries.count() == DELIVERIES
    for delivery in deliveries:
        ids = [
            b["webhook-id"]
            for b in receiver.received
            if b["data"]["object_id"] == str(delivery.event.object_id)
        ]
        assert ids == [webhooks.message_id(delivery)], ids  # sent once
        assert [a.status_code for a in delivery.attempt_log.all()] == [200]
    sent = context.get_state("bridged", "sent")
    assert sent == ["bob@example.com"] * RESUMES, "a resume ran twice or not at all"
    figures(
        f"celery-tasks-database-unreachable-{seconds:g}s",
        deliveries=DELIVERIES,
        delivered=deliveries.filter(status=Delivery.Status.DELIVERED).count(),
        posts_received=len(receiver.received),
        resumes=RESUMES,
        resumed_once=sent.count("bob@example.com"),
        retries_during_outage=retries_during,
        retries=log.count("Retry in"),
        lost=0,
        doubled=len(receiver.received) - DELIVERIES + len(sent) - RESUMES,
        all_done_after_return_s=round(done_in, 1),
    )
