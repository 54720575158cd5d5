"""GET /api/approval-requests/ answers alike on PostgreSQL's statement and the ORM's
QuerySet, byte for byte."""

import pytest
from django.contrib.auth.models import Permission

from agentstate.models import ApprovalRequest
from tests.backends.test_requests_page import filed  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db

Status = ApprovalRequest.Status


@pytest.mark.parametrize("perms", [(), ("view_approvalrequest",)])
def test_a_listing_answers_the_same_bytes_on_either_backend(filed, api_for, settings, perms):
    """Over REST, PostgreSQL's statement and the ORM's QuerySet (which the other
    databases run) forced answer every query alike, byte for byte: a user seeing the
    requests it filed, and one with the view permission seeing every one."""
    alice, _ = filed
    for codename in perms:
        alice.user_permissions.add(Permission.objects.get(codename=codename))
    api = api_for(type(alice).objects.get(pk=alice.pk))
    queries = [
        "",
        *(f"?status={status}" for status in Status.values),
        "?tool_name=pay&page_size=2",
        "?tool_name=pay&page_size=2&page=2",
        "?run_id=run-b",
        "?status=pending&tool_name=pay&run_id=run-a",
        "?page=9",
        "?status=gone",
        "?run_id=..",
        "?tool_name=",
        "?page_size=1&page=0",
    ]
    answers = [api.get(f"/api/approval-requests/{q}") for q in queries]
    settings.AGENTSTATE = {
        **getattr(settings, "AGENTSTATE", {}),
        "BACKEND": "agentstate.backends.orm.ORMBackend",
    }
    for q, answer in zip(queries, answers, strict=True):
        forced = api.get(f"/api/approval-requests/{q}")
        assert (forced.status_code, forced.content) == (answer.status_code, answer.content), q
    assert [a.status_code for a in answers] == [200] * (5 + len(Status.values)) + [
        404,
        400,
        400,
        400,
        404,
    ]
    assert answers[0].json()["count"] == (12 if perms else 6)
    assert any(row["votes"] for row in answers[0].json()["results"])
