"""On PostgreSQL filing, deciding (each vote), checking and consuming under a rule
are one round trip each, and so is each batch of the deadlines' sweep; the rules'
changes are the ORM's (a few statements in one transaction)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext

from agentstate.backends import backend
from agentstate.models import ApprovalRequest
from agentstate.services import approvals, oversight, runs
from agentstate.services.sweep import apply_deadlines

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]


def queries(operation, *args, **kwargs):
    with CaptureQueriesContext(connection) as captured:
        result = operation(*args, **kwargs)
    return result, len(captured)


def test_filing_voting_and_checking_are_one_call(run, reviewer, payments_team):
    oversight.create_rule("pay", approvals_required=2, reviewers=payments_team)
    carol, dave = reviewer("carol"), reviewer("dave")
    request, n = queries(approvals.request_approval, run, "pay", "c1", {"amount": 1})
    assert n == 1 and request.rule_id is not None
    voted, n = queries(approvals.decide, request.pk, "approve", by=carol)
    assert n == 1 and voted.status == "pending"
    decided, n = queries(approvals.decide, request.pk, "approve", by=dave)
    assert n == 1 and decided.status == "approved"
    verdict, n = queries(runs.verdict, run, "pay", "c1", {"amount": 2})
    assert n == 1 and verdict == (False, "arguments_changed")
    consumed, n = queries(oversight.consume, run, "pay", "c1", {"amount": 1})
    assert n == 1 and consumed.consumed_at is not None


def test_each_batch_of_the_deadlines_sweep_is_one_call(run):
    oversight.create_rule("pay", deadline=3600, on_deadline="reject")
    for call in ("c1", "c2", "c3"):
        approvals.request_approval(run, "pay", call, {"amount": 1})
    ApprovalRequest.objects.update(deadline=Now() - timedelta(seconds=1))
    with CaptureQueriesContext(connection) as captured:
        reached = apply_deadlines(backend(), 2)
    assert reached == 3
    assert [sql.split("(")[0] for sql in map(str.strip, (q["sql"] for q in captured))] == [
        "SELECT agentstate_apply_deadlines"
    ] * 2
    assert set(ApprovalRequest.objects.values_list("status", flat=True)) == {"rejected"}
