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
