"""``resumes.ready`` names the runs whose kept state waits although every request
was decided after it was kept, and reads them all in a few queries, not two a run."""

import json

import pytest
from django.utils import timezone

from agentstate.contrib import resumes
from agentstate.contrib.kept import STATE_SCOPE
from agentstate.models import ApprovalRequest
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
