"""GET /api/events/ answers alike on PostgreSQL's statement and the ORM's QuerySet,
byte for byte."""

import pytest
from django.contrib.auth.models import Permission

from tests.backends.test_events_page import logged  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("perms", "count"),
    [
        ((), 4),
        (("view_run",), 7),
        (("decide_approvalrequest",), 8),
        (("view_event",), 13),
    ],
)
def test_a_listing_answers_the_same_bytes_on_either_backend(
    logged, api_for, settings, perms, count
):
    """Over REST, PostgreSQL's statement and the ORM's QuerySet (which the other
    databases run) forced answer every query alike, byte for byte: a user seeing the
    events of what it created or owns, one seeing a model's events too, a reviewer
    every request's, and one seeing every event."""
    alice, _ = logged
    for codename in perms:
        alice.user_permissions.add(Permission.objects.get(codename=codename))
    api = api_for(type(alice).objects.get(pk=alice.pk))
    queries = [
        "",
        "?kind=approval.decided",
        "?object_type=pausedrun&page_size=1",
        "?object_type=approvalrequest&object_id=1",
        "?run_id=run-a",
        "?run_id=run-a&page_size=1&page=2",
        "?run_id=run-b",
        "?run_id=run-none",
        "?page=9",
        "?kind=no.such",
        "?object_type=nothing",
        "?run_id=..",
        "?object_id=",
        "?page_size=1&page=0",
    ]
    answers = [api.get(f"/api/events/{q}") for q in queries]
    settings.AGENTSTATE = {
        **getattr(settings, "AGENTSTATE", {}),
        "BACKEND": "agentstate.backends.orm.ORMBackend",
    }
    for q, answer in zip(queries, answers, strict=True):
        forced = api.get(f"/api/events/{q}")
        assert (forced.status_code, forced.content) == (answer.status_code, answer.content), q
    assert [a.status_code for a in answers] == [200] * 8 + [404, 400, 400, 400, 400, 404]
    assert answers[0].json()["count"] == count
