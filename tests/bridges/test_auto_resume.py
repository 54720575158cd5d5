"""Runs that resume by themselves: a registered bridge, a reviewer's decision in the
admin, and a real Celery worker that finishes the run with no further call.

The worker is the demo site's with ``tests.bridged`` installed (``tests.bridged_site``),
on the test database and the demo's broker: Redis when ``REDIS_URL`` is set (CI
sets it), else the file-system transport in a temporary folder. This process
queues ``resume_run`` on the same broker.
"""

import os
import subprocess
import sys
import time
import uuid

import pytest
from celery import Celery, current_app
from celery.signals import before_task_publish
from django.test import Client
from django.urls import reverse

from agentstate import contrib
from agentstate.contrib import core
from agentstate.models import ApprovalRequest, Event, Run
from agentstate.services import approvals, context
from agentstate.tasks import resume_run
from tests import bridged
from tests.concurrency.test_pauses_processes import ROOT, site_env, stop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def mailer():
    bridge = contrib.register(bridged.NAME, bridged.mailer())
    yield bridge
    contrib.unregister(bridged.NAME)


@pytest.fixture
def broker(tmp_path):
    """This process's Celery app, on the broker the demo site's worker reads."""
    if os.environ.get("REDIS_URL"):
        app = Celery("auto-resume", broker=os.environ["REDIS_URL"])
    else:
        folder = tmp_path / "celery-broker"
        for path in (folder, folder / "processed", folder / "control"):
            path.mkdir(parents=True, exist_ok=True)
        app = Celery("auto-resume", broker="filesystem://")
        app.conf.broker_transport = "project.broker:Transport"
        app.conf.broker_transport_options = {
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "processed_folder": str(folder / "processed"),
            "control_folder": str(folder / "control"),
            "store_processed": False,
        }
    previous = current_app._get_current_object()  # the app itself, not the proxy
    app.set_current()
    yield app
    app.control.purge()  # nothing queued here is left for another test's worker
    app.close()
    previous.set_current()


@pytest.fixture
def published(broker):
    """The names of the tasks this process publishes (Celery's own signal)."""
    names: list[str] = []

    def record(sender: str, **kwargs) -> None:
        names.append(sender)

    before_task_publish.connect(record, weak=False)
    yield names
    before_task_publish.disconnect(record)


@pytest.fixture
def worker(tmp_path, broker):
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "project",
            "worker",
            "--concurrency",
            "1",
            "--loglevel",
            "INFO",
            "--hostname",
            f"resume-{uuid.uuid4().hex[:8]}@%h",
        ],
        cwd=ROOT,
        env=site_env(tmp_path, DJANGO_SETTINGS_MODULE="tests.bridged_site"),
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "celery.log", "w"),
    )
    process.log = tmp_path / "celery.log"
    yield process
    stop(process)


def wait_for(condition, worker, seconds=90):
    deadline = time.monotonic() + seconds
    while not condition():
        assert worker.poll() is None, worker.log.read_text()[-3000:]
        assert time.monotonic() < deadline, worker.log.read_text()[-3000:]
        time.sleep(0.2)


def test_a_decision_in_the_admin_resumes_the_run_on_a_worker_exactly_once(
    mailer, worker, broker, make_user
):
    outcome = mailer.start("Email Bob.", run_id="auto-1")
    assert outcome.status == core.WAITING
    (request,) = ApprovalRequest.objects.filter(run__run_id="auto-1")

    reviewer = make_user("reviewer", "agentstate.decide_approvalrequest", is_staff=True)
    browser = Client()
    browser.force_login(reviewer)
    response = browser.post(
        reverse("admin:agentstate_approvalrequest_changelist"),
        {"action": "approve_selected", "_selected_action": [request.pk]},
        follow=True,
    )
    assert [str(m) for m in response.context["messages"]] == ["1 request approved."]

    # nobody calls resume: the worker finishes the run
    wait_for(lambda: Run.objects.get(run_id="auto-1").requests == 2, worker)
    assert context.get_state("bridged", "sent") == ["bob@example.com"]  # sent once
    assert context.get_state(core.STATE_SCOPE, "auto-1") is None  # nothing waits
    run = Run.objects.get(run_id="auto-1")
    assert (run.input_tokens, run.output_tokens, run.total_tokens) == (20, 8, 28)

    # a second resumption finds nothing to take
    assert mailer.resume("auto-1").status == core.BUSY
    broker.send_task(resume_run.name, (bridged.NAME, "auto-1"))

    def succeeded() -> list[str]:
        lines = worker.log.read_text().splitlines()
        return [
            line
            for line in lines
            if "agentstate.tasks.resume_run[" in line and "] succeeded" in line
        ]

    wait_for(lambda: len(succeeded()) == 2, worker)
    assert context.get_state("bridged", "sent") == ["bob@example.com"]
    first, second = succeeded()
    assert first.endswith(f": '{core.FINISHED}'") and second.endswith(f": '{core.BUSY}'")


def test_a_run_with_requests_still_pending_is_not_queued(mailer, published):
    """Deciding one of two requests queues nothing; deciding the last one queues it once."""
    outcome = mailer.start("Email Bob.", run_id="auto-2")
    assert outcome.status == core.WAITING
    run = Run.objects.get(run_id="auto-2")
    second = approvals.request_approval(run, "send_email", "call-2", {"to": "carol@example.com"})
    first = ApprovalRequest.objects.get(run=run, call_id="call-1")
    approvals.decide(first, "approve")
    assert published == []
    approvals.decide(second, "reject")
    assert published == [resume_run.name]
    assert Event.objects.filter(kind="approval.decided").count() == 2


def test_an_unregistered_bridge_waits_for_a_resume_call(mailer, published):
    bridge = bridged.mailer()  # never registered: its state names no bridge
    assert bridge.start("Email Bob.", run_id="auto-3").status == core.WAITING
    approvals.decide(ApprovalRequest.objects.get(run__run_id="auto-3"), "approve")
    assert published == []  # though a bridge of that name is registered
    assert bridge.resume("auto-3").status == core.FINISHED
    assert context.get_state("bridged", "sent") == ["bob@example.com"]


def test_register_names_and_unregister_forgets():
    bridge = bridged.mailer()
    assert contrib.register("one", bridge) is bridge and bridge.name == "one"
    assert contrib.registered("one") is bridge
    contrib.unregister("one")
    assert bridge.name is None
    with pytest.raises(LookupError, match="No bridge is registered as 'one'"):
        contrib.registered("one")
