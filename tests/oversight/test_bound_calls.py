"""Approvals bound to the call's arguments (the digest), and used once."""

import hashlib
import json

import pytest

from agentstate.exceptions import AlreadyConsumed, ArgumentsChanged, NotApproved
from agentstate.models import Event
from agentstate.services import approvals, oversight, runs
from agentstate.types import arguments_digest

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_digest_is_sha256_of_canonical_json():
    arguments = {"b": [1, 2], "a": "é"}
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical == '{"a":"é","b":[1,2]}'
    assert arguments_digest(arguments) == hashlib.sha256(canonical.encode()).hexdigest()


def test_is_tool_approved_binds_the_arguments(run, alice):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    approvals.decide(request, "approve", by=alice)
    assert runs.is_tool_approved(run, "mail", "c1", {"to": "bob"}) is True
    assert runs.is_tool_approved(run, "mail", "c1", {"to": "eve"}) is False
    assert runs.verdict(run, "mail", "c1", {"to": "eve"}) == (False, "arguments_changed")
    assert runs.is_tool_approved(run, "mail", "c1") is True  # no arguments: as before


def test_consume_once(run, alice):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    with pytest.raises(NotApproved):
        oversight.consume(run, "mail", "c1", {"to": "bob"})
    approvals.decide(request, "approve", by=alice)
    with pytest.raises(ArgumentsChanged):
        oversight.consume(run, "mail", "c1", {"to": "eve"})
    used = oversight.consume(run, "mail", "c1", {"to": "bob"}, by=alice)
    assert used.consumed_at is not None
    with pytest.raises(AlreadyConsumed):
        oversight.consume(run, "mail", "c1", {"to": "bob"})
    event = Event.objects.get(kind="approval.consumed")
    assert event.details["arguments_digest"] == arguments_digest({"to": "bob"})
    assert event.object_id == str(request.pk)


def test_rest_check_and_consume(run, api, alice):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    approvals.decide(request, "approve", arguments={"to": "carol"}, by=alice)
    good, bad = arguments_digest({"to": "carol"}), arguments_digest({"to": "bob"})
    base = "/api/runs/run-1/approvals/?tool_name=mail&call_id=c1"
    assert api.get(f"{base}&arguments_digest={good}").json()["approved"] is True
    changed = api.get(f"{base}&arguments_digest={bad}").json()
    assert changed == {
        "tool_name": "mail",
        "call_id": "c1",
        "approved": False,
        "reason": "arguments_changed",
    }
    assert api.get(f"{base}&arguments_digest=xyz").status_code == 400
    consume = "/api/runs/run-1/approvals/consume/"
    body = {"tool_name": "mail", "call_id": "c1", "arguments_digest": bad}
    answer = api.post(consume, body, format="json")
    assert (answer.status_code, answer.json()["code"]) == (409, "arguments_changed")
    body["arguments_digest"] = good
    first = api.post(consume, body, format="json")
    assert first.status_code == 200 and first.json()["consumed_at"]
    assert (first.json()["id"], first.json()["arguments_digest"]) == (request.pk, good)
    again = api.post(consume, body, format="json")
    assert (again.status_code, again.json()["code"]) == (409, "already_consumed")
    body["call_id"] = "c9"
    missing = api.post(consume, body, format="json")
    assert (missing.status_code, missing.json()["code"]) == (409, "not_approved")
