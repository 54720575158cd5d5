"""A Celery worker killed with SIGKILL while it runs ``resume_run``: the run resumes
exactly once, on another worker, and no decision is lost.

Two workers and a beat of the demo site (with the bridged mailer, whose approved
tool takes ``BRIDGED_TOOL_SECONDS``) on a Redis of the test's own. For each run,
the test decides its request, waits until a worker runs the tool, kills that
worker (and its pool) at a random moment of the call, and starts another. The
killed resume's lease runs out (``RESUME_LEASE``), beat's ``resume_ready`` puts
the state back and queues it again, and the other worker finishes the run.
``AGENTSTATE_KILLS`` sets the number of kills (5).
"""

import os
import random
import time

import pytest

from agentstate.contrib import core, resumes
from agentstate.models import ApprovalRequest, Run
from agentstate.services import approvals, context
from tests.faults.processes import figures, start_beat, start_worker, wait_until, worker_env

pytestmark = pytest.mark.django_db(transaction=True)

TOOL_SECONDS = 2.0


def finished(run_id: str) -> bool:
    return (
        Run.objects.get(run_id=run_id).requests == 2
        and context.get_state(core.STATE_SCOPE, run_id) is None
        and context.get_state(resumes.LEASE_SCOPE, run_id) is None
    )


def test_a_worker_killed_mid_resume_leaves_the_run_to_resume_once_on_another(
    tmp_path, redis, broker, mailer
):
    kills = int(os.environ.get("AGENTSTATE_KILLS", "5"))
    env = worker_env(
        tmp_path,
        redis.url,
        BRIDGED_TOOL_SECONDS=str(TOOL_SECONDS),
        AGENTSTATE_RESUME_LEASE="4",
        CELERY_VISIBILITY_TIMEOUT="10",
    )
    started = [start_beat(tmp_path, env)]
    workers = [start_worker(tmp_path, f"worker-{i}", env) for i in range(2)]
    started += workers
    moments = []
    try:
        for n in range(kills):
            run_id = f"killed-{n}"
            assert mailer.start("Email Bob.", run_id=run_id).status == core.WAITING
            context.put("bridged", "worker", 0)
            approvals.decide(ApprovalRequest.objects.get(run__run_id=run_id), "approve")
            wait_until(
                lambda: context.get_state("bridged", "worker"),
                "a worker running the tool",
                processes=workers,
            )
            pid = context.get_state("bridged", "worker")
            (victim,) = [w for w in workers if w.pid == pid]
            moments.append(round(random.uniform(0, TOOL_SECONDS * 0.9), 2))
            time.sleep(moments[-1])
            victim.kill()
            workers.remove(victim)
            workers.append(start_worker(tmp_path, f"worker-{n + 2}", env))
            started.append(workers[-1])
            wait_until(lambda run_id=run_id: finished(run_id), f"{run_id} to finish", 180, workers)
            assert context.get_state("bridged", "sent") == ["bob@example.com"] * (n + 1), (
                f"{run_id}: the approved call did not run exactly once"
            )
    finally:
        for process in started:
            process.kill()
    runs = Run.objects.filter(run_id__startswith="killed-")
    sent = context.get_state("bridged", "sent")
    figures(
        "worker-killed",
        runs=kills,
        kills=kills,
        kill_moments=moments,
        resumed=sum(1 for run in runs if finished(run.run_id)),
        tool_calls=len(sent),
        lost=sum(1 for run in runs if not finished(run.run_id)),
        doubled=len(sent) - kills,
    )
    assert all(run.total_tokens == 28 for run in runs), "a resumed step counted twice"
