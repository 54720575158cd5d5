"""Regression tests for disagreements between the REST API and docs/rest-api.md
found by probing a live server as an independent client would.
"""

import pytest

pytestmark = pytest.mark.django_db

RUN_PATHS = [
    ("get", "/api/runs/{}/", None),
    ("patch", "/api/runs/{}/", {"context": 1}),
    ("post", "/api/runs/{}/usage/", {}),
    ("get", "/api/runs/{}/approvals/", None),
    ("put", "/api/runs/{}/approvals/", {}),
    ("post", "/api/runs/{}/approvals/approve/", {"tool_name": "t", "call_id": "c"}),
    ("post", "/api/runs/{}/approvals/reject/", {"tool_name": "t", "call_id": "c"}),
    ("post", "/api/runs/{}/approval-requests/", {"tool_name": "t", "call_id": "c"}),
    ("get", "/api/runs/{}/budget/", None),
    ("put", "/api/runs/{}/budget/", {"requests": 1}),
]


@pytest.mark.parametrize(
    "method,path,body", RUN_PATHS, ids=[f"{method} {path}" for method, path, _ in RUN_PATHS]
)
@pytest.mark.parametrize("bad", ["%00", "a%00b", "a%20b", "x" * 129])
def test_a_path_run_id_the_rules_do_not_allow_is_bad_input_not_a_5xx(api, method, path, body, bad):
    """docs/rest-api.md: a run id the table does not allow, or holding U+0000, is bad input (400)."""
    kwargs = {"format": "json"} if body is not None else {}
    response = getattr(api, method)(path.format(bad), body, **kwargs)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid" and response.json()["field"] == "run_id"


def test_a_query_parameter_given_twice_is_bad_input_unless_it_is_a_list(api):
    """Bad input is a 400 naming the field: ``?name=a&name=b`` on a delete must not
    silently delete only ``b``. ``name`` on a context read is the one list."""
    for name in ("a", "b"):
        api.put("/api/context/", {"scope": "s", "name": name, "value": 1}, format="json")
    response = api.delete("/api/context/?scope=s&name=a&name=b")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid" and response.json()["field"] == "name"
    assert api.get("/api/context/", {"scope": "s"}).json()["values"] == {"a": 1, "b": 1}
    for query in ("/api/context/?scope=s&scope=t", "/api/scopes/?prefix=a&prefix=b"):
        response = api.get(query)
        assert response.status_code == 400, response.content
        assert response.json()["field"] in {"scope", "prefix"}
    both = api.get("/api/context/?scope=s&name=a&name=b")
    assert both.status_code == 200 and both.json()["values"] == {"a": 1, "b": 1}


def test_usage_that_would_overflow_a_total_is_bad_input_and_changes_nothing(api):
    """Never a 5xx: a total past the column's range (2**63 - 1) is a 400 naming the field."""
    from agentstate.models import Run

    api.post("/api/runs/", {"run_id": "r"}, format="json")
    top = 2**63 - 1
    Run.objects.filter(run_id="r").update(cached_tokens=top - 10, total_tokens=5)
    response = api.post("/api/runs/r/usage/", {"cached_tokens": 11}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid" and response.json()["field"] == "cached_tokens"
    usage = api.get("/api/runs/r/").json()["usage"]
    assert usage["cached_tokens"] == top - 10 and usage["requests"] == 0
    assert isinstance(usage["cached_tokens"], int)
    exact = api.post("/api/runs/r/usage/", {"cached_tokens": 10}, format="json")
    assert exact.status_code == 200 and exact.json()["cached_tokens"] == top
    assert exact.json()["requests"] == 1 and exact.json()["total_tokens"] == 5


@pytest.mark.parametrize("bad", ["n" * 256, "", "a%00"])
def test_a_bad_name_on_a_context_read_is_named_name(api, bad):
    """The 400 names the query parameter (``name``), not a position in it (``name.0``)."""
    api.put("/api/context/", {"scope": "s", "name": "a", "value": 1}, format="json")
    response = api.get(f"/api/context/?scope=s&name=a&name={bad}")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid" and response.json()["field"] == "name"


def test_the_demo_under_runserver_does_not_keep_a_connection_per_request_thread():
    """runserver serves each request on a new thread; with persistent connections each
    thread's connection outlives it, and concurrent REST clients exhaust PostgreSQL's
    connections (503s). Under runserver the demo closes them per request, unless
    CONN_MAX_AGE says otherwise; other servers keep the default of 60 seconds."""
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    code = (
        "import sys; sys.argv = ['manage.py'] + sys.argv[1:]; import django; django.setup(); "
        "from django.conf import settings; print(settings.DATABASES['default']['CONN_MAX_AGE'])"
    )
    env = {k: v for k, v in os.environ.items() if k != "CONN_MAX_AGE"}
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL="postgres://u@h:5432/d",
        AGENTSTATE_VAR_DIR=tempfile.mkdtemp(prefix="agentstate-site-"),
    )
    root = Path(__file__).resolve().parents[2]

    def conn_max_age(*argv: str, **extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code, *argv],
            env={**env, **extra},
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[-1]

    assert conn_max_age("runserver", "127.0.0.1:8000") == "0"
    assert conn_max_age("runserver", CONN_MAX_AGE="30") == "30"
    assert conn_max_age("migrate") == "60"


def hostile_exception_handler(exc, context):
    from rest_framework.response import Response

    return Response({"site": "handler"}, status=418)


HOSTILE_DRF = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.BasicAuthentication"],
    "EXCEPTION_HANDLER": "tests.api.test_rest_conformance.hostile_exception_handler",
    "DEFAULT_VERSIONING_CLASS": "rest_framework.versioning.QueryParameterVersioning",
    "ALLOWED_VERSIONS": ["9"],
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"user": "1/day", "anon": "1/day"},
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "URL_FORMAT_OVERRIDE": "fmt",
}


def test_a_sites_drf_versioning_throttling_and_handler_do_not_reach_the_api(alice):
    """docs/rest-api.md: only authentication is the site's choice. A site-wide versioning
    class refused every request (404 "Invalid version"); the schema view also
    took the site's handler and throttles."""
    import json

    from django.core.cache import cache
    from django.test import override_settings
    from rest_framework.test import APIClient

    cache.clear()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Basic YWxpY2U6cHc=")  # alice:pw
    with override_settings(REST_FRAMEWORK=HOSTILE_DRF):
        for _ in range(2):
            put = api.put("/api/context/", {"scope": "s", "name": "x", "value": 1}, format="json")
            assert put.status_code == 200, put.content
        missing = api.get("/api/context/?scope=nope")
        assert missing.status_code == 404 and missing.json()["code"] == "scope_not_found"
        assert APIClient().get("/api/scopes/").json()["code"] == "not_authenticated"
        for _ in range(2):
            schema = api.get("/api/schema/?format=json")
            assert schema.status_code == 200, schema.content[:300]
            assert json.loads(schema.content)["openapi"].startswith("3.")
        stream = json.loads(schema.content)["paths"]["/api/events/stream/"]["get"]
        assert "format" in {parameter["name"] for parameter in stream["parameters"]}


@pytest.mark.parametrize(
    "bad", ["abc", "-1", "1.5", "%00", "0x1", "9" * 5000, "99999999999999999999"]
)
def test_an_approval_request_id_that_is_no_number_answers_the_apis_own_404(api, make_user, bad):
    """Errors are ``{"detail", "code"}``: a non-numeric id answered Django's HTML 404 page."""
    response = api.get(f"/api/approval-requests/{bad}/")
    assert response.status_code == 404, response.content
    assert response.json()["code"] == "approval_request_not_found"
    reviewer = make_user("reviewer", "agentstate.decide_approvalrequest")
    api.force_authenticate(reviewer)
    decided = api.post(
        f"/api/approval-requests/{bad}/decide/", {"decision": "approve"}, format="json"
    )
    assert decided.status_code == 404 and decided.json()["code"] == "approval_request_not_found"


def test_a_budget_refusal_is_documented_with_the_budget_and_the_counter(api, make_user):
    """The 409 of ``POST /api/runs/{run_id}/usage/`` is the schema's ``BudgetExceeded``:
    the error shape plus ``budget`` and ``counter``, and the answer matches it."""
    import json

    schema = json.loads(api.get("/api/schema/?format=json").content)
    answer = schema["paths"]["/api/runs/{run_id}/usage/"]["post"]["responses"]["409"]
    ref = answer["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    component = schema["components"]["schemas"][ref]
    assert {"detail", "code", "budget", "counter"} <= set(component["required"])
    from agentstate.services import budgets

    api.post("/api/runs/", {"run_id": "r"}, format="json")
    budgets.set_run_budget("r", {"requests": 0})
    refused = api.post("/api/runs/r/usage/", {}, format="json")
    assert refused.status_code == 409
    assert set(refused.json()) == {"detail", "code", "budget", "counter"}
    assert (refused.json()["budget"], refused.json()["counter"]) == ("run", "requests")


@pytest.mark.parametrize("bad", ["a%00b", "%00"])
def test_a_username_holding_u0000_is_bad_input_not_a_5xx(api, make_user, bad):
    setter = make_user("setter", "agentstate.change_budget")
    api.force_authenticate(setter)
    for method in ("get", "put"):
        response = getattr(api, method)(f"/api/users/{bad}/budget/", {}, format="json")
        assert response.status_code == 400, response.content
        assert response.json()["field"] == "username"


@pytest.mark.parametrize(
    "bad", ["abc", "-1", "1.5", "%00", "0x1", "9" * 5000, "99999999999999999999"]
)
def test_a_policy_id_that_is_no_number_answers_the_apis_own_404(make_user, api_for, bad):
    """Like an approval request's: a path id that is no id is the API's 404, never a 5xx."""
    reviewer = api_for(make_user("reviewer", "agentstate.decide_approvalrequest"))
    response = reviewer.post(f"/api/approval-policies/{bad}/revoke/")
    assert response.status_code == 404, response.content
    assert response.json()["code"] == "not_found"


@pytest.mark.parametrize(
    "field,value",
    [
        ("expires_at", "0001-01-01T00:00:00+14:00"),
        ("expires_at", "9999-12-31T23:59:59-14:00"),
        ("expires_at", "2030-02-30T00:00:00Z"),
        ("expires_at", ""),
        ("expires_at", []),
        ("arguments", True),
        ("user", "x" * 256),
        ("user", ""),
        ("tool_name", "t\x00"),
        ("reason", "a\x00"),
    ],
)
def test_a_malformed_policy_is_a_400_naming_the_field_not_a_5xx(make_user, api_for, field, value):
    from agentstate.models import ApprovalPolicy

    reviewer = api_for(make_user("reviewer", "agentstate.decide_approvalrequest"))
    body = {"tool_name": "mail", "decision": "approve", field: value}
    if field == "arguments" and isinstance(value, dict) and "a" in value:
        # Deeper than MAX_JSON_DEPTH: nest it further.
        for _ in range(70):
            value = {"a": value}
        body[field] = value
    response = reviewer.post("/api/approval-policies/", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid" and response.json()["field"] == field
    assert not ApprovalPolicy.objects.exists()


@pytest.mark.parametrize("debug", [False, True])
def test_a_path_without_its_trailing_slash_answers_308_to_it_keeping_the_body(api, debug):
    """Django's APPEND_SLASH answers such a POST with a 301 (the body lost on the
    way) or, under DEBUG, a 500."""
    from django.test import override_settings

    api.handler.enforce_csrf_checks = True  # as a real client meets it: a token, no CSRF cookie
    with override_settings(DEBUG=debug):
        moved = api.post(
            "/api/context/push?x=1", {"scope": "s", "name": "l", "value": 7}, format="json"
        )
        assert moved.status_code == 308 and moved["Location"] == "/api/context/push/?x=1"
        followed = api.post(
            "/api/context/push", {"scope": "s", "name": "l", "value": 8}, format="json", follow=True
        )
        assert followed.status_code == 200, followed.content
        assert api.get("/api/runs/nope").status_code == 308
    assert api.get("/api/context/", {"scope": "s"}).json()["values"] == {"l": [8]}


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "1.5", "0000", "\u0662", "9" * 5000 + "x"])
def test_a_page_size_that_is_no_whole_number_from_1_is_bad_input(api, bad):
    answer = api.get("/api/scopes/", {"page_size": bad})
    assert answer.status_code == 400 and answer.json() == {
        "detail": "page_size: must be a whole number from 1.",
        "code": "invalid",
        "field": "page_size",
    }


def test_a_page_size_above_the_maximum_gives_the_maximum(api, settings):
    for n in range(3):
        put = api.put("/api/context/", {"scope": f"s{n}", "name": "x", "value": 1}, format="json")
        assert put.status_code == 200
    settings.AGENTSTATE = {**settings.AGENTSTATE, "PAGE_SIZE": 1, "MAX_PAGE_SIZE": 2}
    for asked, shown in (("3", 2), ("0003", 2), ("9" * 5000, 2), ("", 1), ("01", 1)):
        page = api.get("/api/scopes/", {"page_size": asked}).json()
        assert page["count"] == 3 and len(page["results"]) == shown, asked


def test_each_status_has_a_named_enum_and_the_schema_warns_nothing(api, capsys):
    """Three models have a ``status``: drf-spectacular named the requests' one
    "StatusA60Enum" and printed a warning at every generation of the schema."""
    import json

    schema = json.loads(api.get("/api/schema/?format=json").content)
    components = schema["components"]["schemas"]
    assert components["ApprovalRequestStatusEnum"]["enum"] == [
        "pending",
        "approved",
        "rejected",
        "expired",
    ]
    assert "PauseStatusEnum" in components and "DeliveryStatusEnum" in components
    assert not [name for name in components if name.startswith("Status")]
    captured = capsys.readouterr()
    assert "Warning" not in captured.err + captured.out


@pytest.mark.parametrize(
    "path",
    [
        "/api/runs/r1/nope/",
        "/api/runs/r1/approvals/nope/",
        "/api/pauses/nope/",
        "/api/approval-requests/1/nope/",
        "/api/context/nope",
        "/api/webhooks/1/deliveries/nope/",
    ],
)
@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_a_path_beneath_the_apis_own_that_names_nothing_is_the_apis_404(api, method, path):
    """A REST client reads every answer of the API as JSON, a missing path's too."""
    answer = getattr(api, method)(path)
    assert answer.status_code == 404
    assert answer["Content-Type"] == "application/json"
    assert answer.content == b'{"detail":"Not found.","code":"not_found"}'


def test_a_path_beside_the_apis_own_stays_the_sites(api):
    """The site's own pages are not shadowed, wherever the API is mounted."""
    answer = api.get("/api/nope/")
    assert answer.status_code == 404 and not answer["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(
    "path", ["/api/pauses/", "/api/events/", "/api/approval-requests/", "/api/scopes/"]
)
def test_a_listing_takes_the_format_of_its_answer_from_the_query(api, path):
    """``?format=json`` picks the JSON renderer on a listing, as on every other view;
    a format the view does not render is DRF's 404."""
    answer = api.get(path, {"format": "json", "page_size": "5"})
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"] == "application/json"
    assert set(answer.json()) == {"count", "next", "previous", "results"}
    assert api.get(path, {"format": "xml"}).status_code == 404
