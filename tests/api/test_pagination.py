"""Listings: one query per page, the total beside the rows, DRF's links and 404s."""

import pytest

from agentstate.services import context

pytestmark = pytest.mark.django_db


@pytest.fixture
def five_scopes(alice):
    for i in range(5):
        context.put(f"s{i}", "x", i, owner=alice)


def test_a_page_carries_the_total_and_links(api, five_scopes):
    first = api.get("/api/scopes/?page_size=2").json()
    assert first["count"] == 5 and [r["scope"] for r in first["results"]] == ["s0", "s1"]
    assert first["previous"] is None and first["next"].endswith("page=2&page_size=2")
    second = api.get(first["next"]).json()
    assert [r["scope"] for r in second["results"]] == ["s2", "s3"]
    assert "page=" not in second["previous"] and second["next"].endswith("page=3&page_size=2")
    last = api.get(second["next"]).json()
    assert [r["scope"] for r in last["results"]] == ["s4"] and last["next"] is None
    assert last["previous"].endswith("page=2&page_size=2")


def test_an_empty_listing_is_page_one_with_no_rows(api):
    assert api.get("/api/scopes/").json() == {
        "count": 0,
        "next": None,
        "previous": None,
        "results": [],
    }


@pytest.mark.parametrize("page", ["4", "0", "-1", "x", "99999999999"])
def test_a_page_past_the_end_or_no_number_is_not_found(api, five_scopes, page):
    response = api.get(f"/api/scopes/?page_size=2&page={page}")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_a_page_is_one_query(api, five_scopes):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        assert api.get("/api/scopes/?page_size=2&page=2").json()["count"] == 5
    listing = [q["sql"] for q in queries if "agentstate_scope" in q["sql"]]
    assert len(listing) == 1 and "OVER ()" in listing[0]


def voted_once(alice, make_user):
    """A run of alice's and its request for "pay", under a rule wanting two of the
    team's approvals, voted for once by carol, a reviewer: the run, carol and the
    request as the vote left it."""
    from django.contrib.auth.models import Group

    from agentstate.services import approvals, oversight, runs

    team = Group.objects.create(name="team")
    carol = make_user("carol", "agentstate.decide_approvalrequest")
    carol.groups.add(team)
    oversight.create_rule("pay", approvals_required=2, reviewers=team)
    run = runs.create_run("run-1", {"t": 1}, user=alice)
    voted = approvals.request_approval(run, "pay", "c1", {"amount": 10})
    return run, carol, approvals.decide(voted, "approve", by=carol, reason="ok ✓")


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris"])
def test_a_page_s_rows_read_as_their_serializer_shows_each(alice, zone):
    """``represent_rows`` reads the common fields straight off the rows: what it gives
    is what the serializer's ``to_representation`` gives, in the current time zone."""
    from datetime import timedelta

    from django.db.models import Count
    from django.db.models.functions import Now
    from django.utils import timezone

    from agentstate.api.base import represent_rows
    from agentstate.api.context.serializers import ScopeSerializer
    from agentstate.api.events.serializers import EventSerializer
    from agentstate.api.pauses.serializers import PauseSerializer
    from agentstate.models import Event, PausedRun, Scope
    from agentstate.services import pauses

    context.put("s", "x", 1, owner=alice)
    context.put("t", "x", 1)
    question = pauses.put("chat", "a", "alice", {"b": [1, None], "a": "é"}, by=alice)
    pauses.claim("chat", "a", "alice", question)
    pauses.put("chat", "b", "bob", None)
    PausedRun.objects.filter(tool_call_id="b").update(expires_at=Now() - timedelta(seconds=1))
    listings = [
        (PauseSerializer, list(pauses.with_current_status(PausedRun.objects.all()))),
        (EventSerializer, list(Event.objects.all())),
        (
            ScopeSerializer,
            list(Scope.objects.select_related("owner").annotate(variable_count=Count("variables"))),
        ),
    ]
    with timezone.override(zone):
        for serializer, rows in listings:
            assert rows
            shown = represent_rows(serializer, rows)
            assert shown == [serializer(row).data for row in rows], serializer
            assert [list(item) for item in shown] == [list(serializer(r).data) for r in rows]
        shown_at = represent_rows(PauseSerializer, listings[0][1][:1])[0]["created_at"]
        assert shown_at.endswith("Z") == (zone == "UTC")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/St_Johns"])
def test_the_listings_pages_show_as_their_serializers_do(alice, make_user, zone):
    """The three pages as their backend reads them (on PostgreSQL, each row built from
    its columns, times read by psycopg's loader) and shown by ``represent_rows``
    (one compiled function a serializer and row class): the same items, in the same
    key order, rendered to the same bytes as the declared serializers' own output,
    over rows with nulls, odd JSON, decided and voted requests and times in and
    out of the current zone's summer time."""
    from datetime import timedelta

    from django.db.models.functions import Now
    from django.utils import timezone
    from rest_framework.renderers import JSONRenderer

    from agentstate.api.base import represent_rows
    from agentstate.api.events.serializers import EventSerializer
    from agentstate.api.pauses.serializers import PauseSerializer
    from agentstate.api.runs.serializers import ApprovalRequestSerializer
    from agentstate.models import ApprovalRequest, PausedRun
    from agentstate.services import approvals, pauses, trail

    payloads = [
        None,
        {"b": [1, None, 1.5, -0.0, 10**20], "a": "é\u2028\U0001f600", "": {}},
        "text",
        [],
        3.25,
        True,
    ]
    for n, payload in enumerate(payloads):
        pauses.put("chat", f"c{n}", "alice", payload, by=alice if n % 2 else None)
    question = PausedRun.objects.get(tool_call_id="c1").question_id
    pauses.claim("chat", "c1", "alice", question)
    pauses.resolve("chat", "c1")
    PausedRun.objects.filter(tool_call_id="c2").update(expires_at=Now() - timedelta(seconds=1))
    # Times in winter and in summer of the zones that have one.
    PausedRun.objects.filter(tool_call_id="c3").update(created_at=Now() - timedelta(days=180))

    run, carol, _ = voted_once(alice, make_user)
    decided = approvals.request_approval(run, "mail", "c2", {"to": "a@b.c"})
    approvals.decide(decided, "approve", by=carol, arguments={"to": "x@y.z"})
    approvals.request_approval(run, "mail", "c3", None)
    stale = approvals.request_approval(run, "mail", "c4", [1, 2])
    ApprovalRequest.objects.filter(pk=stale.pk).update(created_at=Now() - timedelta(days=400))

    pages = [
        (PauseSerializer, pauses.pauses_page(limit=50).rows),
        (EventSerializer, trail.events_page(limit=100).rows),
        (ApprovalRequestSerializer, approvals.requests_page(limit=50).rows),
    ]
    renderer = JSONRenderer()
    with timezone.override(zone):
        for serializer, rows in pages:
            assert len(rows) > 3, serializer
            shown = represent_rows(serializer, rows)
            declared = serializer(rows, many=True).data
            assert shown == declared, serializer
            assert [list(item) for item in shown] == [list(item) for item in declared]
            assert renderer.render(shown) == renderer.render(declared), serializer


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris"])
def test_an_answer_of_one_object_shows_as_its_serializer_does(alice, make_user, zone):
    """``represent``, which reads one object as ``represent_rows`` reads a row: every
    serializer a view answers one object with gives the same item, keys in the same
    order, rendered to the same bytes as the declared serializer's own output."""
    from django.utils import timezone
    from rest_framework.renderers import JSONRenderer

    from agentstate.api.base import represent
    from agentstate.api.context import serializers as cs
    from agentstate.api.pauses.serializers import PauseSerializer
    from agentstate.api.policies import serializers as ps
    from agentstate.api.runs.serializers import ApprovalRequestSerializer
    from agentstate.api.webhooks.serializers import CreatedWebhookSerializer
    from agentstate.services import approvals, budgets, pauses, webhooks

    run, carol, voted = voted_once(alice, make_user)
    filed, _ = approvals.ensure_request(run, "mail", "c2", {"to": "é\u2028"}, by=alice)
    decided = approvals.decide(filed, "approve", by=carol, arguments={"to": "x@y.z"})
    budgets.set_run_budget("run-1", {"total_tokens": 100}, by=carol)
    put = pauses.put_pause("chat", "a", "alice", {"b": [1, None, -0.0]}, by=alice)
    claimed = pauses.claim_pause("chat", "a", "alice", str(put.question_id))
    objects = [
        (ApprovalRequestSerializer, voted),
        (ApprovalRequestSerializer, filed),
        (ApprovalRequestSerializer, decided),
        (PauseSerializer, put),
        (PauseSerializer, claimed),
        (cs.PutResponse, context.put("s", "x", {"v": 1.5}, owner=alice)),
        (cs.PushResponse, context.push("s", "l", 7, owner=alice)),
        (cs.ListValues, context.get_list("s", "l", owner=alice)),
        (ps.ApprovalPolicySerializer, approvals.create_policy("mail", "reject", by=carol)),
        (ps.RunBudgetSerializer, budgets.as_json(budgets.run_budget("run-1"))),
        (ps.UserBudgetSerializer, budgets.as_json(budgets.user_budget("alice"))),
        (CreatedWebhookSerializer, webhooks.create_webhook("https://example.com/h", None, True)),
    ]
    renderer = JSONRenderer()
    with timezone.override(zone):
        for serializer, instance in objects:
            shown, declared = represent(serializer, instance), serializer(instance).data
            assert shown == declared, serializer
            assert list(shown) == list(declared), serializer
            assert renderer.render(shown) == renderer.render(declared), serializer
