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
