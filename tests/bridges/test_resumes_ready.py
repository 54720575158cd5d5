"""``resumes.ready`` names the runs whose kept state waits although every request
was decided after it was kept, and reads them all in a few queries, not two a run."""

import json
from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.utils import timezone

from agentstate.contrib import resumes
from agentstate.contrib.kept import STATE_SCOPE
from agentstate.models import ApprovalRequest, Variable
from agentstate.services import approvals, context, runs

# each change committed: the database's clock (a kept state's time) moves between them
pytestmark = pytest.mark.django_db(transaction=True)


def keep(run_id: str) -> None:
    context.put(STATE_SCOPE, run_id, json.dumps({"bridge": "b", "state": {}}))


def file(run_id: str, call_id: str, decided: bool) -> None:
    request = approvals.request_approval(run_id, "send", call_id)
    if decided:
        ApprovalRequest.objects.filter(pk=request.pk).update(
            status="approved", decided_at=timezone.now()
        )


def test_ready_names_the_runs_decided_since_their_state_was_kept(django_assert_max_num_queries):
    for run_id in ("early", "ready", "pending", "asking"):
        runs.create_run(run_id)
    file("early", "c1", decided=True)  # decided before its state was kept
    for run_id in ("early", "ready", "pending", "asking"):
        keep(run_id)
    file("ready", "c1", decided=True)
    file("pending", "c1", decided=True)
    file("pending", "c2", decided=False)
    # "asking": no request (it waits on a question)
    many = [f"run-{i}" for i in range(40)]
    for run_id in many:
        runs.create_run(run_id)
        keep(run_id)
        file(run_id, "c1", decided=True)
    keep("gone")  # a state whose run does not exist
    with django_assert_max_num_queries(4):  # two a run: 90 and more
        found = resumes.ready()
    assert sorted(found) == sorted(("b", run_id) for run_id in ["ready", *many])


def test_a_kept_state_and_a_lease_are_timed_by_the_databases_clock(monkeypatch):
    """A node whose clock is a day ahead of the database's: what it keeps and leases
    is timed by the database's clock, which the decisions and consumptions it is
    compared with are, so a decision after it still makes the run ready, and a
    failed resume gives back the approvals consumed after its lease was taken."""
    runs.create_run("run")
    request = approvals.request_approval("run", "send", "c1")
    ahead = timezone.now() + timedelta(days=1)
    monkeypatch.setattr(timezone, "now", lambda: ahead)
    keep("run")
    kept_at = Variable.objects.get(scope__key=STATE_SCOPE, name="run").updated_at
    assert ahead - kept_at > timedelta(hours=23)
    ApprovalRequest.objects.filter(pk=request.pk).update(status="approved", decided_at=Now())
    assert resumes.ready() == [("b", "run")]
    assert resumes.take("run") is not None  # the resume begins, leased
    ApprovalRequest.objects.filter(pk=request.pk).update(consumed_at=Now())
    resumes.put_back("run")  # and fails
    assert ApprovalRequest.objects.get(pk=request.pk).consumed_at is None
