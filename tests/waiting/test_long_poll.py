"""``?wait=S`` on a request and a run, served by uvicorn: answered at once when
there is nothing to wait for, on a decision made by another server process
within a second, at the request's deadline, and 400 for a bad ``wait``."""

import threading
import time

import pytest

from .servers import Uvicorn, call

pytestmark = pytest.mark.django_db(transaction=True)


def file_request(server, token, run_id="run-1", call_id="c1"):
    assert call(server.url, token, "/api/runs/", {"run_id": run_id})[0] in (201, 409)
    status, body = call(
        server.url,
        token,
        f"/api/runs/{run_id}/approval-requests/",
        {"tool_name": "send", "call_id": call_id},
    )
    assert status == 201, body
    return body["id"]


@pytest.mark.parametrize("wait", ["0", "-1", "61", "abc", "nan", "inf", "", "1,5"], ids=repr)
def test_a_bad_wait_is_a_400_naming_wait(server, agent, wait):
    _, token = agent
    pk = file_request(server, token)
    for path in (
        f"/api/approval-requests/{pk}/?wait={wait}",
        f"/api/runs/run-1/?wait={wait}",
        f"/api/events/?after=0&wait={wait}",
    ):
        status, body = call(server.url, token, path)
        assert status == 400, (path, body)
        assert body["code"] == "invalid" and body["field"] == "wait", body


@pytest.mark.parametrize("after", ["-1", "x", "1.5", "%201", "99999999999999999999"], ids=repr)
def test_a_bad_after_is_a_400(server, agent, after):
    _, token = agent
    status, body = call(server.url, token, f"/api/events/?after={after}")
    assert status == 400 and body["field"] == "after", body


def test_a_waiter_is_woken_within_a_second_of_a_decision_on_another_server(server, agent, reviewer):
    _, token = agent
    _, reviewer_token = reviewer
    pk = file_request(server, token)
    answers = {}

    def wait():
        started = time.monotonic()
        answers["wait"] = call(server.url, token, f"/api/approval-requests/{pk}/?wait=30")
        answers["woken"] = time.monotonic()
        answers["waited"] = answers["woken"] - started

    waiter = threading.Thread(target=wait)
    with Uvicorn(server.env) as other:
        waiter.start()
        time.sleep(1.5)
        assert "wait" not in answers  # still waiting
        status, _ = call(
            other.url,
            reviewer_token,
            f"/api/approval-requests/{pk}/decide/",
            {"decision": "approve"},
        )
        decided = time.monotonic()
        assert status == 200
        waiter.join(10)
    status, body = answers["wait"]
    assert status == 200 and body["status"] == "approved", body
    assert answers["woken"] - decided < 1.0, answers


def test_a_decided_request_answers_at_once_and_a_timeout_answers_pending(server, agent, reviewer):
    _, token = agent
    pk = file_request(server, token)
    started = time.monotonic()
    status, body = call(server.url, token, f"/api/approval-requests/{pk}/?wait=0.5")
    assert status == 200 and body["status"] == "pending"
    assert 0.5 <= time.monotonic() - started < 3
    call(server.url, reviewer[1], f"/api/approval-requests/{pk}/decide/", {"decision": "reject"})
    started = time.monotonic()
    status, body = call(server.url, token, f"/api/approval-requests/{pk}/?wait=30")
    assert status == 200 and body["status"] == "rejected"
    assert time.monotonic() - started < 2


def test_a_waiter_sees_only_what_it_may_see(server, agent, make_user):
    _, token = agent
    pk = file_request(server, token)
    from rest_framework.authtoken.models import Token

    other = Token.objects.create(user=make_user("mallory")).key
    started = time.monotonic()
    status, body = call(server.url, other, f"/api/approval-requests/{pk}/?wait=5")
    assert status == 404 and body["code"] == "approval_request_not_found"
    status, body = call(server.url, other, "/api/runs/run-1/?wait=5")
    assert status == 404 and body["code"] == "run_not_found"
    assert time.monotonic() - started < 3
    status, body = call(server.url, "", f"/api/approval-requests/{pk}/?wait=5")
    assert status == 401


def test_a_waiter_is_answered_at_its_requests_deadline(transactional_db, agent):
    from tests.hardening import database_env

    _, token = agent
    env = database_env()
    env["AGENTSTATE_APPROVAL_TTL"] = "2"
    with Uvicorn(env) as server:
        pk = file_request(server, token)
        started = time.monotonic()
        status, body = call(server.url, token, f"/api/approval-requests/{pk}/?wait=20")
        assert status == 200 and body["status"] == "expired", (
            body,
            time.monotonic() - started,
            server.output(),
        )
        assert time.monotonic() - started < 4


def test_a_run_waiter_answers_when_a_request_of_the_run_is_filed(server, agent):
    _, token = agent
    file_request(server, token, call_id="c1")
    answers = {}

    def wait():
        answers["run"] = call(server.url, token, "/api/runs/run-1/?wait=20")
        answers["at"] = time.monotonic()

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(1)
    assert "run" not in answers
    call(
        server.url,
        token,
        "/api/runs/run-1/approvals/approve/",
        {"tool_name": "send", "call_id": "c9"},
    )
    changed = time.monotonic()
    waiter.join(10)
    status, body = answers["run"]
    assert status == 200 and body["approvals"]["send"]["approved"] == ["c9"], body
    assert answers["at"] - changed < 1.0


def test_a_waiter_is_answered_at_its_rules_deadline_sweep_or_not(server, agent):
    """A request filed under a rule stops being pending at the rule's deadline, fixed
    at filing, not at ``APPROVAL_TTL`` (a day here): its waiter and the run's are
    answered then, with no sweep running."""
    from agentstate.services import oversight

    oversight.create_rule("send", deadline=2)
    _, token = agent
    pk = file_request(server, token)
    answers = {}

    def wait_run():
        answers["run"] = call(server.url, token, "/api/runs/run-1/?wait=20")
        answers["run_at"] = time.monotonic()

    started = time.monotonic()
    run_waiter = threading.Thread(target=wait_run)
    run_waiter.start()
    status, body = call(server.url, token, f"/api/approval-requests/{pk}/?wait=20")
    assert status == 200 and body["status"] == "expired", body
    assert time.monotonic() - started < 4
    run_waiter.join(10)
    status, body = answers["run"]
    assert status == 200 and answers["run_at"] - started < 4, body
