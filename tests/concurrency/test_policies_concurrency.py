"""A policy revoked while calls are being filed, with real threads and their own connections.

The invariant (docs/concepts.md, "Approval policies"): every request the policy
decided has ``decided_at`` before the policy's ``revoked_at``, and no request
filed after the revocation returned is decided by it. On PostgreSQL a filed
call locks the deciding policy's row FOR SHARE and the revocation locks it FOR
UPDATE before it takes ``revoked_at`` from the clock; on SQLite IMMEDIATE
transactions serialize the two.

SQLite's busy handler is not fair: a writer that has waited long polls for the
lock least often (its sleeps grow to 100 ms), so six filers in a loop can hold
the revocation off past its busy timeout, and ``db.retried`` runs it again,
five times in all. There, once the revocation has begun, each filer starts at
most ``DURING`` more calls before it waits for the revocation to return: calls
are still in flight while it waits for the lock, and none starves it.
"""

import threading
import time

import pytest
from django.db import connection

from agentstate.models import ApprovalPolicy, ApprovalRequest
from agentstate.services import approvals, runs

pytestmark = pytest.mark.django_db(transaction=True)

FILERS = 6
AFTER = 15  # requests each filer files once it has seen the revocation return
BEFORE = 0.5  # seconds of filing before the revocation
DURING = 2  # on SQLite, calls a filer starts once the revocation has begun


def test_a_revoked_policy_decides_nothing_filed_after_its_revocation(
    concurrently, make_user, is_postgres
):
    reviewer = make_user("reviewer", "agentstate.decide_approvalrequest")
    agent = make_user("agent")
    policy = approvals.create_policy("mail", "approve", by=reviewer)
    filer_runs = [runs.create_run(f"race-{i}", user=agent).run_id for i in range(FILERS)]
    revoking, revoked = threading.Event(), threading.Event()
    filed: list[list[tuple[int, bool]]] = [[] for _ in range(FILERS)]
    paced = connection.vendor == "sqlite"

    def work(i: int) -> None:
        if i == FILERS:  # the revoker
            time.sleep(BEFORE)
            revoking.set()
            try:
                approvals.revoke_policy(policy.pk, by=reviewer)
            finally:
                # a revocation that failed stops the filers too: its error is the
                # result the test reports, where they would file forever
                revoked.set()
            return
        n = after = during = 0
        while after < AFTER:
            seen = revoked.is_set()  # before the call starts
            if paced and not seen and revoking.is_set():
                during += 1
                if during > DURING:
                    revoked.wait(60)
                    continue
            request = approvals.request_approval(filer_runs[i], "mail", f"c{n}", {"n": n})
            filed[i].append((request.pk, seen))
            n += 1
            after += seen

    results = concurrently(FILERS + 1, work)
    assert results == [None] * (FILERS + 1), results

    stored = ApprovalPolicy.objects.get(pk=policy.pk)
    assert stored.revoked_at is not None
    requests = {r.pk: r for r in ApprovalRequest.objects.all()}
    after_ids = {pk for rows in filed for pk, seen in rows if seen}
    by_policy = [r for r in requests.values() if r.policy_id == policy.pk]
    assert all(r.decided_at < stored.revoked_at for r in by_policy), [
        (r.pk, r.decided_at, stored.revoked_at)
        for r in by_policy
        if r.decided_at >= stored.revoked_at
    ]
    assert not [pk for pk in after_ids if requests[pk].policy_id is not None]
    assert all(requests[pk].status == "pending" for pk in after_ids)
    # Each request is decided by the policy or left pending, and its record agrees.
    assert {(r.status, r.policy_id) for r in requests.values()} <= {
        ("approved", policy.pk),
        ("pending", None),
    }
    for r in by_policy[:20]:
        assert runs.is_tool_approved(r.run.run_id, "mail", r.call_id) is True
    pending_before = [
        r for r in requests.values() if r.pk not in after_ids and r.status == "pending"
    ]
    assert by_policy and len(after_ids) == FILERS * AFTER
    print(
        f"\nrevocation race ({'PostgreSQL' if is_postgres else 'SQLite'}): {len(requests)} requests"
        f" from {FILERS} threads; {len(by_policy)} decided by the policy, all before its"
        f" revoked_at; {len(pending_before)} filed while it was being revoked left pending;"
        f" {len(after_ids)} filed after the revocation returned, none decided by it"
    )


def _in_thread(target):
    """Start ``target()`` in a thread with its own connection; ``join()`` gives its result."""
    from django.db import connections

    box: dict = {}

    def work() -> None:
        try:
            box["result"] = target()
        except BaseException as error:  # noqa: BLE001 - reported to the test
            box["result"] = error
        finally:
            connections.close_all()

    thread = threading.Thread(target=work)
    thread.start()

    def join(timeout: float = 60):
        thread.join(timeout)
        assert not thread.is_alive(), "the thread hung"
        return box["result"]

    join.thread = thread  # type: ignore[attr-defined]
    return join


def test_a_revocation_waits_for_the_request_its_policy_is_deciding(make_user):
    """A request decided by the policy, not yet committed, holds the revocation back:
    revoked_at is taken after the request commits."""
    from django.db import transaction

    policy = approvals.create_policy("mail", "approve")
    run = runs.create_run("held", user=make_user("agent"))
    with transaction.atomic():
        request = approvals.request_approval(run, "mail", "c1")
        assert request.policy_id == policy.pk
        revoking = _in_thread(lambda: approvals.revoke_policy(policy.pk))
        time.sleep(0.5)
        assert revoking.thread.is_alive(), "the revocation did not wait for the request"
    revoked = revoking()
    assert isinstance(revoked, ApprovalPolicy), revoked
    stored = ApprovalRequest.objects.get(pk=request.pk)
    assert stored.decided_at < revoked.revoked_at and stored.policy_id == policy.pk


def test_a_request_filed_while_a_revocation_commits_is_left_pending(make_user):
    """The other way round: a request waiting for an uncommitted revocation finds the
    policy revoked once it commits, and is filed pending."""
    from django.db import transaction

    policy = approvals.create_policy("mail", "approve")
    run = runs.create_run("held", user=make_user("agent"))
    with transaction.atomic():
        approvals.revoke_policy(policy.pk)
        filing = _in_thread(lambda: approvals.request_approval(run, "mail", "c1"))
        time.sleep(0.5)
        assert filing.thread.is_alive(), "the request did not wait for the revocation"
    filed = filing()
    assert isinstance(filed, ApprovalRequest), filed
    assert (filed.status, filed.policy_id) == ("pending", None)
