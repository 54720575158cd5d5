"""On PostgreSQL filing, deciding (each vote) and checking under a rule stay one
round trip; the rules, consume and the deadlines' sweep are the ORM's (a few
statements in one transaction), counted here so that a change shows."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentstate.services import approvals, oversight, runs

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
    _, n = queries(oversight.consume, run, "pay", "c1", {"amount": 1})
    print(f"\nconsume on PostgreSQL: {n} statements in one transaction")
    assert n <= 10
