"""Oversight's fixtures: a group of reviewers, users in it, and a run of alice's."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from agentstate.models import ApprovalRequest
from agentstate.services import runs

DECIDE = "agentstate.decide_approvalrequest"


@pytest.fixture
def payments_team(db):
    return Group.objects.create(name="payments-reviewers")


@pytest.fixture
def leads(db):
    return Group.objects.create(name="leads")


@pytest.fixture
def reviewer(make_user, payments_team):
    """Who makes reviewer(name): a user who may decide, in the payments group."""

    def make(name: str, *groups: Group):
        user = make_user(name, DECIDE)
        user.groups.add(*(groups or (payments_team,)))
        return user

    return make


@pytest.fixture
def run(alice):
    return runs.create_run("run-1", {"ticket": 1}, user=alice)


def shift(request: ApprovalRequest, **fields: timedelta) -> None:
    """Move a request's times (``deadline``, ``remind_at``, ``escalate_at``) to now
    plus each timedelta: how a test makes time pass."""
    ApprovalRequest.objects.filter(pk=request.pk).update(
        **{name: timezone.now() + delta for name, delta in fields.items()}
    )
