"""Webhooks sent by a real Celery worker (with beat) to a real receiver on loopback.

The receiver verifies every request with the ``standardwebhooks`` package. The
worker is the demo site's, on the test database; its beat sends what is due
every second, so a delivery arrives whether or not the message queued after
commit reached it. ``AGENTSTATE_KILL_REPETITIONS`` sets how many times the
kill test kills a worker in the middle of a delivery (3 by default).
"""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from django.db import transaction

from agentstate.models import Delivery
from agentstate.services import approvals, runs, webhooks
from tests.concurrency.test_pauses_processes import ROOT, site_env, stop
from tests.webhook_receiver import kinds, receiving

pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"WEBHOOK_ALLOW_PRIVATE": True, "WEBHOOK_BACKOFF": 0.2, "WEBHOOK_TIMEOUT": 1}


def start_worker(tmp_path, name: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "project",
            "worker",
            "--beat",
            "--concurrency",
            "1",
            "--loglevel",
            "INFO",
            "--hostname",
            f"webhooks-{name}-{uuid.uuid4().hex[:8]}@%h",
            "--schedule",
            str(tmp_path / f"celerybeat-{name}"),
        ],
        cwd=ROOT,
        env=site_env(
            tmp_path,
            AGENTSTATE_WEBHOOK_ALLOW_PRIVATE="1",
            AGENTSTATE_WEBHOOK_SECONDS="1",
            AGENTSTATE_SWEEP_SECONDS="3600",
            AGENTSTATE_WEBHOOK_BACKOFF="0.2",
            AGENTSTATE_WEBHOOK_TIMEOUT="1",
        ),
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / f"celery-{name}.log", "w"),
        start_new_session=True,  # its own process group: the pool's children with it
    )


def wait_for(condition, worker, tmp_path, name, seconds=60):
    deadline = time.monotonic() + seconds
    while not condition():
        assert worker.poll() is None, (tmp_path / f"celery-{name}.log").read_text()[-3000:]
        assert time.monotonic() < deadline, (tmp_path / f"celery-{name}.log").read_text()[-3000:]
        time.sleep(0.2)


@pytest.fixture
def run(alice):
    return runs.create_run("hooked", user=alice)


def test_a_filed_approval_request_arrives_signed(tmp_path, settings, run):
    settings.AGENTSTATE = FAST
    hook = webhooks.create_webhook("http://127.0.0.1:1/", ["approval.requested"])
    with receiving(hook.secret) as receiver:
        hook.url = receiver.url
        hook.save(update_fields=["url"])
        request = approvals.request_approval(run, "send_email", "call-1", {"to": "x@y.z"})
        runs.approve(run, "other", "call-9")  # approvals.changed: not a kind it wants
        worker = start_worker(tmp_path, "arrives")
        try:
            wait_for(lambda: receiver.received, worker, tmp_path, "arrives")
            time.sleep(1.5)  # one more beat: nothing else is sent
        finally:
            stop(worker)
    assert receiver.refused == 0 and kinds(receiver) == ["approval.requested"]
    body = receiver.received[0]
    assert body["data"]["object_id"] == str(request.pk)
    assert body["data"]["details"]["tool_name"] == "send_email"
    assert Delivery.objects.get().status == Delivery.Status.DELIVERED


def test_a_receiver_answering_500_twice_gets_the_third_attempt(tmp_path, settings, run):
    settings.AGENTSTATE = FAST
    hook = webhooks.create_webhook("http://127.0.0.1:1/")
    with receiving(hook.secret, statuses=[500, 500]) as receiver:
        hook.url = receiver.url
        hook.save(update_fields=["url"])
        approvals.request_approval(run, "send_email", "call-1")
        worker = start_worker(tmp_path, "retries")
        try:
            delivery = Delivery.objects.get()
            wait_for(
                lambda: Delivery.objects.get().status == Delivery.Status.DELIVERED,
                worker,
                tmp_path,
                "retries",
            )
        finally:
            stop(worker)
    delivery.refresh_from_db()
    assert [a.status_code for a in delivery.attempt_log.order_by("pk")] == [500, 500, 200]
    assert len({body["webhook-id"] for body in receiver.received}) == 1
    assert receiver.refused == 0


def test_a_rolled_back_change_sends_nothing(settings, run):
    settings.AGENTSTATE = FAST
    webhooks.create_webhook("http://127.0.0.1:1/")
    with pytest.raises(RuntimeError), transaction.atomic():
        approvals.request_approval(run, "send_email", "call-1")
        assert Delivery.objects.count() == 1  # written with the event...
        raise RuntimeError("the change failed")
    assert not Delivery.objects.exists()  # ...and gone with it
    assert webhooks.due() == []


def test_a_worker_killed_mid_delivery_leaves_it_to_be_sent_after_the_restart(
    tmp_path, settings, run
):
    settings.AGENTSTATE = FAST
    repetitions = int(os.environ.get("AGENTSTATE_KILL_REPETITIONS", "3"))
    hook = webhooks.create_webhook("http://127.0.0.1:1/")
    with receiving(hook.secret, hang_first=True) as receiver:
        hook.url = receiver.url
        hook.save(update_fields=["url"])
        for n in range(repetitions):
            approvals.request_approval(run, "send_email", f"call-{n}")
            delivery = Delivery.objects.get(event__details__call_id=f"call-{n}")
            seen = len(receiver.received)
            worker = start_worker(tmp_path, f"killed-{n}")
            try:
                wait_for(
                    lambda seen=seen: len(receiver.received) > seen,
                    worker,
                    tmp_path,
                    f"killed-{n}",
                )
            finally:
                # SIGKILL to the worker and its pool: no chance to record or acknowledge
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(10)
            delivery.refresh_from_db()
            assert delivery.status == Delivery.Status.PENDING, "an answer was recorded"
            restarted = start_worker(tmp_path, f"restarted-{n}")
            try:
                wait_for(
                    lambda pk=delivery.pk: Delivery.objects.get(pk=pk).status
                    == Delivery.Status.DELIVERED,
                    restarted,
                    tmp_path,
                    f"restarted-{n}",
                )
            finally:
                stop(restarted)
    delivered = Delivery.objects.filter(status=Delivery.Status.DELIVERED).count()
    assert delivered == repetitions, "a delivery was lost across a kill"
    for delivery in Delivery.objects.all():
        ids = [b for b in receiver.received if b["webhook-id"] == webhooks.message_id(delivery)]
        assert len(ids) >= 2  # the interrupted try and the one acknowledged
        assert delivery.attempt_log.filter(status_code=200).count() == 1
