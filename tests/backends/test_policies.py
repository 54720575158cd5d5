"""Approval policies and approve-with-edits through the Python API (docs/concepts.md)."""

import json
from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentstate.db import database_now
from agentstate.exceptions import (
    AlreadyRevoked,
    BadInput,
    PastExpiry,
    PolicyNotFound,
    UnknownOwner,
)
from agentstate.models import ApprovalPolicy, ApprovalRequest, Event, Run
from agentstate.policies import DECIDED_BY_POLICY, contains, json_equal
from agentstate.services import approvals, runs
from agentstate.types import arguments_digest

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(alice) -> Run:
    return runs.create_run("run-1", {"ticket": 42}, user=alice)


@pytest.fixture
def reviewer(make_user):
    return make_user("reviewer", "agentstate.decide_approvalrequest")


def test_a_policy_decides_a_later_call_filed_decided_naming_it(run, alice, reviewer):
    policy = approvals.create_policy(
        "mail", "approve", user=alice, by=reviewer, reason="alice mails often"
    )
    assert (policy.user_name, policy.created_by_name) == ("alice", "reviewer")
    assert policy.created_at is not None and policy.revoked_at is None
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"}, by=alice)
    assert (request.status, request.decided_by, request.policy_id) == ("approved", None, policy.pk)
    assert request.reason == "alice mails often" and request.decided_at is not None
    assert request.current_status == "approved" and request.always is False
    # The run's record says so, as a decision would have written it.
    assert runs.records(run) == {"mail": {"approved": ["c1"], "rejected": []}}
    assert runs.is_tool_approved(run, "mail", "c1") is True
    requested = Event.objects.get(kind="approval.requested")
    assert requested.details == {
        "run_id": "run-1",
        "tool_name": "mail",
        "call_id": "c1",
        "status": "approved",
        "policy": policy.pk,
        "arguments": {"to": "bob"},
        "arguments_digest": arguments_digest({"to": "bob"}),
    }
    # The audit of the request: filed, then decided by the policy (no decider).
    decided = Event.objects.get(kind="approval.decided")
    assert (decided.actor, decided.user_id, decided.object_id) == (
        f"policy:{policy.pk}",
        None,
        str(request.pk),
    )
    assert decided.details == {
        "run_id": "run-1",
        "tool_name": "mail",
        "call_id": "c1",
        "decision": "approve",
        "always": False,
        "reason": "alice mails often",
        "policy": policy.pk,
    }
    assert decided.pk > requested.pk
    changed = Event.objects.get(kind="approvals.changed")
    assert (changed.actor, changed.user_id) == (f"policy:{policy.pk}", None)
    assert changed.details["decision"] == "approve"


def test_without_a_reason_the_request_names_the_policy(run):
    policy = approvals.create_policy("mail", "reject")
    request = approvals.request_approval(run, "mail", "c1")
    assert (request.status, request.reason) == ("rejected", DECIDED_BY_POLICY % policy.pk)
    assert runs.records(run) == {"mail": {"approved": [], "rejected": ["c1"]}}


def test_the_runs_own_records_come_before_any_policy(run):
    approvals.create_policy("mail", "reject")
    runs.approve(run, "mail", "c1")
    request = approvals.request_approval(run, "mail", "c1")
    assert (request.status, request.policy_id) == ("approved", None)
    decided = Event.objects.get(kind="approval.decided", object_id=str(request.pk))
    assert (decided.actor, decided.user_id) == ("records", None)
    assert decided.details["decision"] == "approve" and decided.details["policy"] is None
    assert runs.is_tool_approved(run, "mail", "c1") is True
    assert runs.is_tool_approved(run, "mail", "c2") is False


def test_a_reject_policy_wins_over_an_approve_policy(run, alice):
    approvals.create_policy("mail", "approve", user=alice)
    rejecting = approvals.create_policy("mail", "reject")
    approvals.create_policy("mail", "approve")
    request = approvals.request_approval(run, "mail", "c1")
    assert (request.status, request.policy_id) == ("rejected", rejecting.pk)
    assert runs.is_tool_approved(run, "mail", "c2") is False


def test_a_policy_applies_to_its_users_runs_only(run, alice, bob):
    approvals.create_policy("mail", "approve", user=bob)
    assert approvals.request_approval(run, "mail", "c1").status == "pending"
    bobs = runs.create_run("run-2", user=bob)
    assert approvals.request_approval(bobs, "mail", "c1").status == "approved"
    anonymous = runs.create_run("run-3")
    assert approvals.request_approval(anonymous, "mail", "c1").status == "pending"
    approvals.create_policy("mail", "approve", user="alice")  # by username
    assert approvals.request_approval(run, "mail", "c2").status == "approved"
    assert approvals.request_approval(anonymous, "mail", "c2").status == "pending"


def test_other_tools_are_not_decided(run):
    approvals.create_policy("mail", "approve")
    assert approvals.request_approval(run, "shell", "c1").status == "pending"
    assert runs.is_tool_approved(run, "shell", "c1") is None


def test_an_arguments_pattern_must_be_contained_in_the_calls_arguments(run):
    policy = approvals.create_policy("mail", "approve", arguments={"to": "bob", "cc": {"x": 1}})
    matched = approvals.request_approval(
        run, "mail", "c1", {"to": "bob", "cc": {"x": 1, "y": 2}, "body": "hi"}
    )
    assert (matched.status, matched.policy_id) == ("approved", policy.pk)
    for n, arguments in enumerate(
        [
            {"to": "eve", "cc": {"x": 1}},
            {"to": "bob"},
            {"to": "bob", "cc": {"x": True}},
            {"to": "bob", "cc": 1},
            ["to", "bob"],
            None,
        ]
    ):
        assert approvals.request_approval(run, "mail", f"n{n}", arguments).status == "pending"


def test_is_tool_approved_applies_a_pattern_only_to_given_arguments(run):
    approvals.create_policy("mail", "approve", arguments={"to": "bob"})
    assert runs.is_tool_approved(run, "mail", "c1") is None
    assert runs.is_tool_approved(run, "mail", "c1", {"to": "bob", "body": "x"}) is True
    assert runs.is_tool_approved(run, "mail", "c1", {"to": "eve"}) is None
    approvals.create_policy("mail", "reject")
    assert runs.is_tool_approved(run, "mail", "c1") is False


def test_a_revoked_or_expired_policy_decides_nothing(run, reviewer):
    policy = approvals.create_policy("mail", "approve", expires_at=timedelta(hours=1))
    assert approvals.request_approval(run, "mail", "c1").policy_id == policy.pk
    ApprovalPolicy.objects.filter(pk=policy.pk).update(expires_at=Now() - timedelta(seconds=1))
    assert approvals.request_approval(run, "mail", "c2").status == "pending"
    assert runs.is_tool_approved(run, "mail", "c3") is None

    lasting = approvals.create_policy("mail", "approve")
    revoked = approvals.revoke_policy(lasting.pk, by=reviewer)
    assert revoked.revoked_at is not None and revoked.revoked_by_id == reviewer.pk
    assert approvals.request_approval(run, "mail", "c4").status == "pending"
    event = Event.objects.get(kind="policy.revoked")
    assert (event.object_type, event.object_id, event.actor) == (
        "approvalpolicy",
        str(lasting.pk),
        "reviewer",
    )
    assert event.details["tool_name"] == "mail" and event.details["decision"] == "approve"
    # The request it decided before keeps its decision and its link.
    assert ApprovalRequest.objects.get(call_id="c1").policy_id == policy.pk


def test_revoking_twice_or_a_missing_policy_is_refused(reviewer):
    policy = approvals.create_policy("mail", "approve")
    approvals.revoke_policy(policy, by=reviewer)
    events_before = Event.objects.count()
    with pytest.raises(AlreadyRevoked) as caught:
        approvals.revoke_policy(policy, by=reviewer)
    assert (caught.value.status, caught.value.code) == (409, "already_revoked")
    for missing in (policy.pk + 1000, 0, -1, 2**63):
        with pytest.raises(PolicyNotFound) as not_found:
            approvals.revoke_policy(missing)
        assert (not_found.value.status, not_found.value.code) == (404, "not_found")
    assert Event.objects.count() == events_before


def test_creating_a_policy_records_an_event(alice, reviewer):
    policy = approvals.create_policy(
        "mail", "reject", user=alice, arguments={"to": "eve"}, reason="no", by=reviewer
    )
    event = Event.objects.get(kind="policy.created")
    assert (event.object_type, event.object_id, event.actor, event.user_id) == (
        "approvalpolicy",
        str(policy.pk),
        "reviewer",
        reviewer.pk,
    )
    assert event.details == {
        "tool_name": "mail",
        "decision": "reject",
        "user_id": alice.pk,
        "arguments": {"to": "eve"},
        "expires_at": None,
        "reason": "no",
    }


@pytest.mark.parametrize(
    "args,options,field",
    [
        (("", "approve"), {}, "tool_name"),
        (("mail", "maybe"), {}, "decision"),
        (("mail", "approve"), {"arguments": ["to"]}, "arguments"),
        (("mail", "approve"), {"arguments": "x"}, "arguments"),
        (("mail", "approve"), {"arguments": {"a": float("nan")}}, "arguments"),
        (("mail", "approve"), {"expires_at": timedelta(seconds=-1)}, "expires_at"),
        (("mail", "approve"), {"expires_at": "tomorrow"}, "expires_at"),
        (("mail", "approve"), {"reason": 5}, "reason"),
        (("mail", "approve"), {"user": 7}, "user"),
        (("mail", "approve"), {"user": ""}, "user"),
    ],
)
def test_create_policy_refuses_bad_input_and_writes_nothing(args, options, field):
    with pytest.raises(BadInput) as caught:
        approvals.create_policy(*args, **options)
    assert caught.value.field == field
    assert not ApprovalPolicy.objects.exists() and not Event.objects.exists()


def test_a_naive_or_past_expiry_is_refused():
    with pytest.raises(BadInput, match="time zone"):
        approvals.create_policy("mail", "approve", expires_at=timezone.now().replace(tzinfo=None))
    with pytest.raises(BadInput, match="future"):  # the database's now: in force no longer
        approvals.create_policy("mail", "approve", expires_at=database_now())
    for lifetime in (timedelta(0), timedelta(seconds=-1), -timedelta(days=1_000_000)):
        with pytest.raises(PastExpiry) as caught:
            approvals.create_policy("mail", "approve", expires_at=lifetime)
        assert caught.value.field == "expires_at" and caught.value.status == 400
    for lifetime in (timedelta(days=1_000_000, microseconds=1), timedelta.max, timedelta.min):
        with pytest.raises(BadInput, match="within 1,000,000 days") as caught:
            approvals.create_policy("mail", "approve", expires_at=lifetime)
        assert caught.value.field == "expires_at"
    assert not ApprovalPolicy.objects.exists() and not Event.objects.exists()


def test_a_policys_expiry_is_by_the_databases_clock(monkeypatch):
    """A node whose clock is a day behind: a policy for an hour lasts an hour of the
    database's clock, by which it is in force; a time an hour ahead of that node's
    clock is the database's past, refused."""
    behind = timezone.now() - timedelta(days=1)
    monkeypatch.setattr(timezone, "now", lambda: behind)
    policy = approvals.create_policy("mail", "approve", expires_at=timedelta(hours=1))
    assert abs(policy.expires_at - policy.created_at - timedelta(hours=1)) < timedelta(minutes=1)
    with pytest.raises(BadInput, match="future"):
        approvals.create_policy("mail", "approve", expires_at=behind + timedelta(hours=1))


def test_an_unknown_username_is_refused_on_field_user():
    with pytest.raises(UnknownOwner) as caught:
        approvals.create_policy("mail", "approve", user="nobody")
    assert caught.value.field == "user" and caught.value.status == 400
    assert not ApprovalPolicy.objects.exists() and not Event.objects.exists()


def test_the_policies_listing_filters(alice, reviewer):
    mine = approvals.create_policy("mail", "approve", user=alice)
    everyone = approvals.create_policy("shell", "reject")
    gone = approvals.create_policy("mail", "approve")
    approvals.revoke_policy(gone)
    expired = approvals.create_policy("mail", "approve", expires_at=timedelta(hours=1))
    ApprovalPolicy.objects.filter(pk=expired.pk).update(expires_at=Now())
    assert list(approvals.policies()) == [expired, gone, everyone, mine]
    assert list(approvals.policies(tool_name="shell")) == [everyone]
    assert list(approvals.policies(user="alice")) == [mine]
    assert list(approvals.policies(user=alice)) == [mine]
    assert list(approvals.policies(active=True)) == [everyone, mine]
    assert list(approvals.policies(active=False)) == [expired, gone]


def test_a_policy_and_a_decision_in_one_transaction_commit_together(run, alice, reviewer):
    request = approvals.request_approval(run, "mail", "c1")

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        approvals.decide(request, "approve", by=reviewer)
        approvals.create_policy("mail", "approve", user=alice, by=reviewer)
        raise Rollback
    assert ApprovalRequest.objects.get(pk=request.pk).status == "pending"
    assert not ApprovalPolicy.objects.exists()
    with transaction.atomic():
        approvals.decide(request, "approve", by=reviewer)
        approvals.create_policy("mail", "approve", user=alice, by=reviewer)
    assert approvals.request_approval(run, "mail", "c2").status == "approved"


# Approving with edited arguments.


def test_approving_with_edited_arguments_keeps_both(run, reviewer):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob", "body": "hi"})
    decided = approvals.decide(
        request, "approve", by=reviewer, arguments={"to": "bob@example.com", "body": "hi"}
    )
    assert decided.arguments == {"to": "bob", "body": "hi"}
    assert decided.approved_arguments == {"to": "bob@example.com", "body": "hi"}
    stored = ApprovalRequest.objects.get(pk=request.pk)
    assert stored.approved_arguments == {"to": "bob@example.com", "body": "hi"}
    assert stored.arguments == {"to": "bob", "body": "hi"}
    event = Event.objects.get(kind="approval.decided")
    assert event.details["arguments"] == {"to": "bob", "body": "hi"}
    assert event.details["approved_arguments"] == {"to": "bob@example.com", "body": "hi"}
    assert runs.is_tool_approved(run, "mail", "c1") is True


def test_approving_with_the_filed_arguments_or_none_is_no_edit(run, reviewer):
    first = approvals.request_approval(run, "mail", "c1", {"to": "bob", "n": 1})
    same = approvals.decide(first, "approve", by=reviewer, arguments={"n": 1.0, "to": "bob"})
    assert same.approved_arguments is None
    second = approvals.request_approval(run, "mail", "c2", {"to": "bob"})
    assert approvals.decide(second, "approve", by=reviewer).approved_arguments is None
    assert all(
        "approved_arguments" not in e.details for e in Event.objects.filter(kind="approval.decided")
    )
    filed_null = approvals.request_approval(run, "mail", "c3")
    edited = approvals.decide(filed_null, "approve", by=reviewer, arguments={"to": "x"})
    assert edited.approved_arguments == {"to": "x"}


def test_arguments_with_a_rejection_are_bad_input_and_change_nothing(run, reviewer):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    with pytest.raises(BadInput) as caught:
        approvals.decide(request, "reject", by=reviewer, arguments={"to": "eve"})
    assert caught.value.field == "arguments"
    with pytest.raises(BadInput) as deep:
        approvals.decide(request, "approve", by=reviewer, arguments={"a": float("inf")})
    assert deep.value.field == "arguments"
    assert ApprovalRequest.objects.get(pk=request.pk).status == "pending"
    assert runs.records(run) == {}


# The matching rules.


@pytest.mark.parametrize(
    "value,pattern,expected",
    [
        ({"a": 1, "b": 2}, {"a": 1}, True),
        ({"a": 1}, {}, True),
        ([], {}, False),
        ({"a": True}, {"a": 1}, False),
        ({"a": 1}, {"a": True}, False),
        ({"a": 1.0}, {"a": 1}, True),
        ({"a": [1, 2]}, {"a": [1, 2]}, True),
        ({"a": [1, 2, 3]}, {"a": [1, 2]}, False),
        ({"a": [2, 1]}, {"a": [1, 2]}, False),
        ({"a": [{"x": 1, "y": 2}]}, {"a": [{"x": 1}]}, False),
        ({"a": {"b": {"c": 1, "d": 2}}}, {"a": {"b": {"c": 1}}}, True),
        ({"a": None}, {"a": None}, True),
        ({}, {"a": None}, False),
        ({"a": "1"}, {"a": 1}, False),
        (None, {}, False),
        (10**23, 1e23, True),  # as JSON texts say (jsonb), not as binary floats
    ],
)
def test_containment(value, pattern, expected):
    assert contains(value, pattern) is expected


def test_json_equality_is_by_json_type_and_value():
    assert json_equal(1, 1.0) and not json_equal(True, 1) and not json_equal(0, False)
    assert json_equal({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]})
    assert not json_equal({"a": 1}, {"a": 1, "b": 2}) and not json_equal([1], (1, 2))


# The same rules in SQL: a property test on PostgreSQL.

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0, 1, 1.0, 0.0, -0.0, 2, 10**23, 1e23, 0.1, "1", "", "a", True, False])
    | st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))
)
KEYS = st.sampled_from(["a", "b", "c", "to", ""])
JSON = st.recursive(
    JSON_SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=3),
    max_leaves=8,
)


def _sql_contains(cursor, value, pattern) -> bool:
    cursor.execute(
        "SELECT agentstate_json_contains(%s::jsonb, %s::jsonb)",
        [None if value is None else json.dumps(value), json.dumps(pattern)],
    )
    return cursor.fetchone()[0]


@pytest.mark.postgres_only
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=JSON,
    pattern=st.dictionaries(KEYS, JSON, max_size=3),
    shared=st.dictionaries(KEYS, JSON, max_size=3),
)
def test_python_and_sql_agree_on_containment(value, pattern, shared):
    """Arbitrary values and patterns, and values built to contain a pattern (``shared``
    merged in), answer the same in ``policies.contains`` and ``agentstate_json_contains``."""
    from django.db import connection

    with connection.cursor() as cursor:
        for candidate, wanted in (
            (value, pattern),
            ({**shared, **pattern} if isinstance(value, dict) else value, pattern),
            ({**pattern, **shared}, pattern),
            (value, shared),
        ):
            assert _sql_contains(cursor, candidate, wanted) is contains(candidate, wanted), (
                candidate,
                wanted,
            )
    # A call's arguments not given (SQL NULL): no pattern is contained.
    with connection.cursor() as cursor:
        assert _sql_contains(cursor, None, pattern) is False
