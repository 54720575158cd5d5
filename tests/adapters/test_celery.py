"""A real Celery worker with beat expires a short-lived pause; nobody calls the task.

The broker is Redis when ``REDIS_URL`` is set (CI sets it), else kombu's
file-system transport in a temporary folder: the demo's no-service setup.
The worker and beat are the demo site's (``celery -A project worker
--beat``), started against the test database with a one-second schedule.
"""

import subprocess
import sys
import time
import uuid

import pytest

from agentstate.models import Event, PausedRun
from agentstate.services import pauses
from tests.concurrency.test_pauses_processes import ROOT, site_env, stop

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_celery_worker_with_beat_expires_a_short_lived_pause(tmp_path):
    question = pauses.put("chat", "call", "alice", {"waiting": True}, ttl=1)
    worker = subprocess.Popen(
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
            f"pauses-test-{uuid.uuid4().hex[:8]}@%h",
            "--schedule",
            str(tmp_path / "celerybeat-schedule"),
        ],
        cwd=ROOT,
        env=site_env(tmp_path, AGENTSTATE_SWEEP_SECONDS="1"),
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "celery.log", "w"),
    )
    try:
        deadline = time.monotonic() + 90
        while PausedRun.objects.get().status == "pending" and time.monotonic() < deadline:
            assert worker.poll() is None, (tmp_path / "celery.log").read_text()[-3000:]
            time.sleep(0.5)
        assert PausedRun.objects.get().status == "expired", (tmp_path / "celery.log").read_text()[
            -3000:
        ]
    finally:
        stop(worker)
    event = Event.objects.get(kind="pause.expired")
    assert (event.object_id, event.actor, event.details["question_id"]) == (
        "chat#call",
        "sweeper",
        question,
    )
    log = (tmp_path / "celery.log").read_text()
    assert (
        "Sending due task agentstate-expire-pauses (agentstate.tasks.expire_pauses)" in log
    )  # beat
    assert "Task agentstate.tasks.expire_pauses[" in log  # the worker
