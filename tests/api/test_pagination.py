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
