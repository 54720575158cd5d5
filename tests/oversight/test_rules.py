"""Approval rules: the model's defaults, the service, REST and their events."""

import pytest

from agentstate.exceptions import BadInput, RuleExists, RuleNotFound
from agentstate.models import ApprovalRule, Event
from agentstate.services import approvals, oversight

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_rule_has_the_defaults_of_the_table():
    rule = oversight.create_rule("pay")
    assert (
        rule.approvals_required,
        rule.reviewers_id,
        rule.allow_self_approval,
        rule.deadline,
        rule.on_deadline,
        rule.remind_before,
        rule.escalate_after,
        rule.escalate_to_id,
    ) == (1, None, False, None, "expire", None, None, None)


def test_create_change_delete_write_events(alice, payments_team):
    rule = oversight.create_rule(
        "pay", approvals_required=2, reviewers="payments-reviewers", by=alice
    )
    assert rule.reviewers_id == payments_team.pk
    changed = oversight.change_rule(rule, deadline=3600, on_deadline="reject", by=alice)
    assert (changed.deadline, changed.on_deadline) == (3600, "reject")
    oversight.delete_rule(rule.pk, by=alice)
    assert not ApprovalRule.objects.exists()
    kinds = list(
        Event.objects.filter(object_type="approvalrule").order_by("pk").values_list("kind", "actor")
    )
    assert kinds == [
        ("rule.created", "alice"),
        ("rule.changed", "alice"),
        ("rule.deleted", "alice"),
    ]
    change = Event.objects.get(kind="rule.changed")
    assert change.details["changed"] == {"deadline": 3600, "on_deadline": "reject"}


def test_a_rules_times_are_by_the_databases_clock(monkeypatch):
    # The process's clock a day behind: what it would write shows.
    from datetime import timedelta

    from django.utils import timezone

    behind = timezone.now() - timedelta(days=1)
    monkeypatch.setattr(timezone, "now", lambda: behind)
    rule = oversight.create_rule("pay")
    assert rule.updated_at == rule.created_at  # one statement, one database time
    assert rule.created_at - behind > timedelta(hours=23)
    changed = oversight.change_rule(rule, deadline=3600)
    stored = ApprovalRule.objects.get(pk=rule.pk)
    assert changed.updated_at == stored.updated_at > rule.updated_at
    assert stored.updated_at - behind > timedelta(hours=23)


def test_refusals():
    oversight.create_rule("pay")
    with pytest.raises(RuleExists):
        oversight.create_rule("pay")
    with pytest.raises(BadInput) as bad:
        oversight.create_rule("x", approvals_required=0)
    assert bad.value.field == "approvals_required"
    with pytest.raises(BadInput) as bad:
        oversight.create_rule("x", reviewers="nobody")
    assert bad.value.field == "reviewers"
    with pytest.raises(BadInput):
        oversight.create_rule("x", deadline=60, remind_before=60)
    with pytest.raises(BadInput):
        oversight.create_rule("x", on_deadline="explode")
    with pytest.raises(RuleNotFound):
        oversight.delete_rule(10**6)


def test_a_request_copies_its_rule_when_filed(run, payments_team, leads):
    rule = oversight.create_rule(
        "pay",
        approvals_required=2,
        reviewers=payments_team,
        deadline=3600,
        on_deadline="reject",
        remind_before=900,
        escalate_after=1800,
        escalate_to=leads,
    )
    request = approvals.request_approval(run, "pay", "c1", {"amount": 10})
    assert request.rule_id == rule.pk
    assert (request.approvals_required, request.reviewers_id, request.allow_self_approval) == (
        2,
        payments_team.pk,
        False,
    )
    assert request.on_deadline == "reject" and request.escalate_to_id == leads.pk
    life = (request.deadline - request.created_at).total_seconds()
    assert abs(life - 3600) < 5
    assert abs((request.deadline - request.remind_at).total_seconds() - 900) < 1
    assert abs((request.escalate_at - request.created_at).total_seconds() - 1800) < 5
    # a later change applies to later requests only
    oversight.change_rule(rule, approvals_required=3)
    request.refresh_from_db()
    assert request.approvals_required == 2
    assert approvals.request_approval(run, "pay", "c2").approvals_required == 3


def test_a_tool_without_a_rule_is_as_before(run, alice):
    request = approvals.request_approval(run, "mail", "c1", {"to": "bob"})
    assert request.rule_id is None and request.deadline is None
    assert request.allow_self_approval and request.approvals_required == 1
    decided = approvals.decide(request, "approve", by=alice)  # its creator may decide it
    assert decided.status == "approved" and not decided.votes.exists()


# REST


def test_rest_rules_crud(api_for, make_user, payments_team):
    manager = api_for(make_user("manager", "agentstate.change_approvalrule"))
    created = manager.post(
        "/api/approval-rules/",
        {"tool_name": "pay", "approvals_required": 2, "reviewers": "payments-reviewers"},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["reviewers"] == "payments-reviewers" and body["on_deadline"] == "expire"
    assert body["escalate_to"] is None and body["deadline"] is None
    path = f"/api/approval-rules/{body['id']}/"
    assert manager.get("/api/approval-rules/").json()["count"] == 1
    assert manager.get(path).json()["tool_name"] == "pay"
    patched = manager.patch(path, {"deadline": 3600, "remind_before": 900}, format="json")
    assert patched.status_code == 200 and patched.json()["deadline"] == 3600
    again = manager.post("/api/approval-rules/", {"tool_name": "pay"}, format="json")
    assert (again.status_code, again.json()["code"]) == (409, "rule_exists")
    bad = manager.patch(path, {"reviewers": "nobody"}, format="json")
    assert (bad.status_code, bad.json()["field"]) == (400, "reviewers")
    unknown = manager.post("/api/approval-rules/", {"tool_name": "x", "color": 1}, format="json")
    assert unknown.status_code == 400
    assert manager.delete(path).status_code == 204
    assert manager.get(path).status_code == 404
    assert manager.get("/api/approval-rules/nope/").status_code == 404


def test_rest_rules_take_their_permissions(api_for, alice, make_user):
    nobody = api_for(alice)
    assert nobody.get("/api/approval-rules/").status_code == 403
    refused = nobody.post("/api/approval-rules/", {"tool_name": "pay"}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (403, "permission_denied")
    deciding = api_for(make_user("rev", "agentstate.decide_approvalrequest"))
    assert deciding.get("/api/approval-rules/").status_code == 200
    assert (
        deciding.post("/api/approval-rules/", {"tool_name": "x"}, format="json").status_code == 403
    )
