"""A page of approval requests (``approvals.requests_page``): on PostgreSQL one fixed
statement with each request's votes, elsewhere the ORM's QuerySet; both as a
QuerySet says, for every filter and reach."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentstate.backends import backend
from agentstate.backends.orm import ORMBackend
from agentstate.conf import agentstate_settings
from agentstate.exceptions import BadInput
from agentstate.models import ApprovalRequest
from agentstate.services import approvals, oversight, runs
from agentstate.types import Reach
from tests.conftest import is_token_lookup

pytestmark = pytest.mark.django_db

Status = ApprovalRequest.Status


@pytest.fixture
def filed(make_user):
    """Requests of every current status in two runs, filed by alice, bob or no one,
    some under a rule of two approvals with votes (one by a voter since deleted),
    one pending past its rule's deadline, one past ``APPROVAL_TTL``, two sharing a
    ``created_at`` (the id then orders them)."""
    alice, bob = make_user("alice"), make_user("bob")
    carol, dave, erin = make_user("carol"), make_user("dave"), make_user("erin")
    oversight.create_rule("pay", approvals_required=2, deadline=3600)
    first = runs.create_run("run-a", None, user=alice)
    second = runs.create_run("run-b", None, user=bob)
    filed = {}
    for n, (run, tool, by) in enumerate(
        [
            (first, "mail", alice),
            (first, "pay", alice),
            (second, "pay", bob),
            (second, "mail", None),
        ]
        * 3
    ):
        arguments = {"n": n, "text": "\u00e9t\u00e9", "list": [n, None]}
        filed[n] = approvals.request_approval(run, tool, f"call-{n}", arguments, by=by)
    approvals.decide(filed[0], "approve", by=carol, reason="fine")
    approvals.decide(filed[3], "reject", by=dave, reason="no")
    approvals.decide(filed[1], "approve", by=carol, reason="one")  # pending, one vote
    approvals.decide(filed[1], "approve", by=erin, arguments={"n": 0})  # an edit: still one
    approvals.decide(filed[2], "approve", by=carol)
    approvals.decide(filed[2], "approve", by=dave)  # approved, two votes
    approvals.decide(filed[6], "reject", by=erin, reason="\u00e9")  # rejected by a vote
    erin.delete()  # the votes stay, by no one
    ApprovalRequest.objects.filter(pk=filed[4].pk).update(
        created_at=Now() - agentstate_settings.APPROVAL_TTL - timedelta(seconds=1)
    )
    ApprovalRequest.objects.filter(pk=filed[5].pk).update(deadline=Now() - timedelta(seconds=1))
    ApprovalRequest.objects.filter(pk=filed[7].pk).update(status=Status.EXPIRED)
    ApprovalRequest.objects.filter(pk=filed[9].pk).update(created_at=filed[8].created_at)
    return alice, bob


def reference(filters: dict, reach: Reach | None) -> list[ApprovalRequest]:
    """The listing as a QuerySet says it: what ``requests_page`` must answer."""
    rows = approvals.with_current_status(ApprovalRequest.objects.all())
    if reach is not None:
        rows = rows.filter(created_by_id=reach.user_id)
    if "status" in filters:
        rows = rows.filter(approvals.in_status(filters["status"]))
    if "tool_name" in filters:
        rows = rows.filter(tool_name=filters["tool_name"])
    if "run_id" in filters:
        rows = rows.filter(run__run_id=filters["run_id"])
    return list(rows.order_by("created_at", "pk"))


def shown(page: list[ApprovalRequest]) -> list[tuple]:
    """Every field of each request, its current status, run, decider and votes."""
    fields = [f.attname for f in ApprovalRequest._meta.concrete_fields]
    return [
        (
            *(getattr(r, f) for f in fields),
            r.current_status,
            r.run.run_id,
            None if r.decided_by is None else r.decided_by.get_username(),
            [
                (
                    None if v.by is None else v.by.get_username(),
                    *(getattr(v, f.attname) for f in v._meta.concrete_fields),
                )
                for v in approvals.votes_of(r)
            ],
        )
        for r in page
    ]


FILTERS = [
    {},
    *({"status": status} for status in Status.values),
    {"tool_name": "pay"},
    {"run_id": "run-b"},
    {"run_id": "run-none"},
    {"status": "pending", "tool_name": "pay", "run_id": "run-a"},
    {"status": "expired", "run_id": "run-b"},
    {"status": "approved", "tool_name": "mail"},
]


def test_a_page_of_requests_is_the_listing_s_query_on_every_backend(filed):
    alice, bob = filed
    backends = [backend(), ORMBackend(connection.alias)]
    reaches = [None, Reach(alice.pk, "alice"), Reach(bob.pk, "bob"), Reach(None, "nobody")]
    ttl = agentstate_settings.APPROVAL_TTL
    seen, voted = set(), 0
    for filters in FILTERS:
        for reach in reaches:
            expected = reference(filters, reach)
            seen.update(r.current_status for r in expected)
            for offset, limit in [(0, 50), (0, 3), (2, 3), (len(expected), 5), (40, 5)]:
                rows = expected[offset : offset + limit]
                for answering in backends:
                    page = answering.approval_requests_page(filters, ttl, reach, offset, limit)
                    assert shown(page.rows) == shown(rows), (answering, filters, reach)
                    assert page.total == (len(expected) if rows else 0)
                    voted += sum(len(approvals.votes_of(r)) for r in page.rows)
    assert seen == set(Status.values) and voted


def test_one_request_pending_past_its_rule_s_deadline_reads_expired(filed):
    late = ApprovalRequest.objects.filter(deadline__lte=Now()).get()
    for answering in [backend(), ORMBackend(connection.alias)]:
        found = answering.approval_request(late.pk, agentstate_settings.APPROVAL_TTL, None)
        assert (found.status, found.current_status) == ("pending", "expired"), answering


def test_requests_page_checks_its_arguments(filed):
    alice, _ = filed
    page = approvals.requests_page(reach=Reach(alice.pk, "alice"), limit=2, tool_name="pay")
    assert page.total == 3 and len(page.rows) == 2
    for bad in [
        {"status": "gone"},
        {"colour": "red"},
        {"tool_name": ""},
        {"run_id": ".."},
        {"tool_name": 1},
        {"limit": 0},
        {"offset": -1},
    ]:
        with pytest.raises(BadInput):
            approvals.requests_page(**{"limit": 5, **bad})


@pytest.mark.postgres_only
@pytest.mark.parametrize("perms", [(), ("view_approvalrequest",)])
@pytest.mark.parametrize(
    "query",
    ["", "?status=expired", "?tool_name=pay&run_id=run-a&page_size=1", "?page=2&page_size=1"],
)
def test_a_page_of_requests_is_the_token_lookup_and_one_statement(filed, perms, query):
    alice, _ = filed
    for codename in perms:
        alice.user_permissions.add(Permission.objects.get(codename=codename))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=alice).key}")
    with CaptureQueriesContext(connection) as queries:
        response = api.get(f"/api/approval-requests/{query}")
    assert response.status_code == 200, response.content
    token, page = (q["sql"] for q in queries)
    assert is_token_lookup(token) and page.startswith("SELECT p.*"), page
    assert response.json()["count"] >= 1
