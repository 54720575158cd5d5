"""A page of events (``trail.events_page``): on PostgreSQL one fixed statement, elsewhere
the ORM's QuerySet; both as a QuerySet says, for every filter and reach."""

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.db.models import CharField, Q
from django.db.models.functions import Cast
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentstate.backends import backend
from agentstate.backends.orm import ORMBackend
from agentstate.exceptions import BadInput
from agentstate.models import ApprovalRequest, Event
from agentstate.services import approvals, pauses, runs, trail
from agentstate.types import Reach
from tests.conftest import is_token_lookup

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged(make_user):
    """Events of pauses, runs and approval requests: made by alice, bob or no one,
    owned by bob or carol, decided by carol, one by a user since deleted (erin), in
    two runs; two events share a ``created_at`` (the id then orders them)."""
    alice, bob = make_user("alice"), make_user("bob")
    carol, erin = make_user("carol"), make_user("erin")
    first = runs.create_run("run-a", None, user=alice)
    second = runs.create_run("run-b", None, user=bob)
    filed = [
        approvals.request_approval(run, "mail", f"call-{n}", {"n": n}, by=by)
        for n, (run, by) in enumerate([(first, alice), (second, bob), (second, None)])
    ]
    approvals.decide(filed[0], "approve", by=carol, reason="\u00e9t\u00e9")
    approvals.decide(filed[1], "reject", by=erin)
    approvals.decide(filed[2], "approve", by=carol)  # a request filed by no one
    pauses.put("chat-1", "made", "bob", {"q": 1}, by=alice)
    pauses.put("chat-1", "owned", "carol", [1, None], by=bob)
    pauses.put("chat-2", "nobody's", "carol", "text")
    runs.approve(second, "pay", "call-9", by=bob)
    erin.delete()  # her events stay, by no one
    first_event, second_event = Event.objects.order_by("pk")[:2]
    Event.objects.filter(pk=second_event.pk).update(created_at=first_event.created_at)
    return alice, bob


def reference(filters: dict, reach: Reach | None) -> list[Event]:
    """The listing as a QuerySet says it: what ``events_page`` must answer."""
    rows = Event.objects.all()
    if reach is not None:
        seen = Q(owner=reach.username) | Q(object_type__in=reach.object_types)
        if reach.user_id is not None:
            seen |= Q(created_by_id=reach.user_id)
        rows = rows.filter(seen)
    if "run_id" in filters:
        requests = (
            ApprovalRequest.objects.filter(run__run_id=filters["run_id"])
            .annotate(key=Cast("pk", CharField()))
            .values("key")
        )
        rows = rows.filter(
            Q(object_type="run", object_id=filters["run_id"])
            | Q(object_type="approvalrequest", object_id__in=requests)
        )
    rows = rows.filter(**{k: v for k, v in filters.items() if k != "run_id"})
    return list(rows.order_by("-created_at", "-pk"))


def shown(page: list[Event]) -> list[tuple]:
    """Every field of each event, its user's and its creator's username."""
    fields = [f.attname for f in Event._meta.concrete_fields]
    return [
        (
            *(getattr(e, f) for f in fields),
            None if e.user is None else e.user.username,
            None if e.created_by is None else e.created_by.username,
        )
        for e in page
    ]


FILTERS = [
    {},
    {"kind": "approval.decided"},
    {"object_type": "pausedrun"},
    {"object_type": "approvalrequest", "object_id": "1"},
    {"object_id": "chat-1#made"},
    {"run_id": "run-a"},
    {"run_id": "run-b"},
    {"run_id": "run-none"},
    {"run_id": "run-b", "kind": "approval.decided"},
    {"run_id": "run-b", "object_type": "run", "kind": "approvals.changed"},
    {"kind": "no.such"},
]


def test_a_page_of_events_is_the_listing_s_query_on_every_backend(logged):
    alice, bob = logged
    backends = [backend(), ORMBackend(connection.alias)]
    reaches = [
        None,
        Reach(alice.pk, "alice"),
        Reach(bob.pk, "bob", ("run",)),
        Reach(alice.pk, "alice", ("approvalrequest", "pausedrun")),
        Reach(None, "carol"),
        Reach(None, "nobody", ("run",)),
    ]
    assert len(reference({}, None)) >= 12
    seen = set()
    for filters in FILTERS:
        for reach in reaches:
            expected = reference(filters, reach)
            seen.update(
                (e.object_type, e.user_id is None, e.created_by_id is None) for e in expected
            )
            for offset, limit in [(0, 50), (0, 3), (2, 3), (len(expected), 5), (40, 5)]:
                rows = expected[offset : offset + limit]
                for answering in backends:
                    page = answering.events_page(filters, reach, offset, limit)
                    assert shown(page.rows) == shown(rows), (answering, filters, reach)
                    assert page.total == (len(expected) if rows else 0)
    # every kind of object, with and without a user and a creator
    assert {kind for kind, *_ in seen} == {"run", "approvalrequest", "pausedrun"}
    assert {(no_user, no_creator) for _, no_user, no_creator in seen} == {
        (False, False),
        (False, True),
        (True, False),
        (True, True),
    }


def test_a_reach_s_owned_and_created_events_are_each_counted_once(logged):
    """PostgreSQL reads a reach without object types as two parts, the events of what
    it owns and those of what it created that it does not own: an event of both is
    shown and counted once, and a page crosses from one part to the other in order."""
    _, bob = logged
    pauses.put("chat-3", "both", "bob", {"q": 3}, by=bob)  # created and owned by bob
    pauses.put("chat-3", "made", "carol", {"q": 4}, by=bob)  # created by bob only
    pauses.put("chat-3", "owned", "bob", {"q": 5})  # owned by bob only
    reach = Reach(bob.pk, "bob")
    expected = reference({}, reach)
    kinds = {(e.created_by_id == bob.pk, e.owner == "bob") for e in expected}
    assert kinds == {(True, True), (True, False), (False, True)}
    for filters in [{}, {"object_type": "pausedrun"}, {"kind": "pause.created"}]:
        expected = reference(filters, reach)
        for offset in range(len(expected) + 1):
            rows = expected[offset : offset + 2]
            for answering in [backend(), ORMBackend(connection.alias)]:
                page = answering.events_page(filters, reach, offset, 2)
                assert shown(page.rows) == shown(rows), (answering, filters, offset)
                assert page.total == (len(expected) if rows else 0)


def test_events_page_checks_its_arguments(logged):
    alice, _ = logged
    page = trail.events_page(reach=Reach(alice.pk, "alice"), limit=2, object_type="pausedrun")
    assert page.total == 1 and len(page.rows) == 1
    for bad in [
        {"colour": "red"},
        {"kind": ""},
        {"object_type": "x" * 33},
        {"object_id": 1},
        {"run_id": ".."},
        {"limit": 0},
        {"offset": -1},
    ]:
        with pytest.raises(BadInput):
            trail.events_page(**{"limit": 5, **bad})


@pytest.mark.postgres_only
@pytest.mark.parametrize("perms", [(), ("view_run",), ("view_event",)])
@pytest.mark.parametrize(
    "query",
    [
        "",
        "?kind=approval.decided",
        "?run_id=run-a&kind=approval.decided&page_size=1",
        "?page=2&page_size=1",
    ],
)
def test_a_page_of_events_is_the_token_lookup_and_one_statement(logged, perms, query):
    alice, _ = logged
    for codename in perms:
        alice.user_permissions.add(Permission.objects.get(codename=codename))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=alice).key}")
    with CaptureQueriesContext(connection) as queries:
        response = api.get(f"/api/events/{query}")
    assert response.status_code == 200, response.content
    token, page = (q["sql"] for q in queries)
    assert is_token_lookup(token) and page.startswith("SELECT p.*"), page
    assert response.json()["count"] >= 1
