"""Regression tests for disagreements between the REST API and SPEC section 5
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
]


@pytest.mark.parametrize(
    "method,path,body", RUN_PATHS, ids=[f"{method} {path}" for method, path, _ in RUN_PATHS]
)
@pytest.mark.parametrize("bad", ["%00", "a%00b", "a%20b", "x" * 129])
def test_a_path_run_id_the_rules_do_not_allow_is_bad_input_not_a_5xx(
    api, method, path, body, bad
):
    """SPEC 5: a run id the table does not allow, or holding U+0000, is bad input (400)."""
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
    from pathlib import Path

    code = (
        "import sys; sys.argv = ['manage.py'] + sys.argv[1:]; import django; django.setup(); "
        "from django.conf import settings; print(settings.DATABASES['default']['CONN_MAX_AGE'])"
    )
    env = {k: v for k, v in os.environ.items() if k != "CONN_MAX_AGE"}
    env.update(DJANGO_SETTINGS_MODULE="project.settings", DATABASE_URL="postgres://u@h:5432/d")
    root = Path(__file__).resolve().parent.parent

    def conn_max_age(*argv: str, **extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code, *argv], env={**env, **extra}, cwd=root,
            capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[-1]

    assert conn_max_age("runserver", "127.0.0.1:8000") == "0"
    assert conn_max_age("runserver", CONN_MAX_AGE="30") == "30"
    assert conn_max_age("migrate") == "60"
