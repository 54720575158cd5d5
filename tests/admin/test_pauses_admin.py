"""Pauses in the admin: filters, age and time left, the cancel action, final states read-only."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db.models.functions import Now
from django.test import Client

from agentstate.models import Event, PausedRun
from agentstate.services import pauses

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/agentstate/pausedrun/"


@pytest.fixture
def admin_client() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "x"))
    return client


def test_the_list_shows_age_and_time_left_and_filters_by_status_and_owner(admin_client):
    pauses.put("chat", "a", "alice", None, ttl=timedelta(hours=3))
    question = pauses.put("chat", "b", "bob", None)
    pauses.claim("chat", "b", "bob", question)
    page = admin_client.get(CHANGELIST)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Time left" in text and "Age" in text and "2h 59m" in text
    assert "By status" in text and "By owner" in text
    assert (
        admin_client.get(CHANGELIST, {"status__exact": "claimed"}).context["cl"].result_count == 1
    )
    assert admin_client.get(CHANGELIST, {"owner": "alice"}).context["cl"].result_count == 1


def test_the_cancel_action_cancels_pending_pauses_through_the_service(admin_client):
    pauses.put("chat", "pending", "alice", None)
    question = pauses.put("chat", "claimed", "alice", None)
    pauses.claim("chat", "claimed", "alice", question)
    ids = list(PausedRun.objects.values_list("pk", flat=True))
    page = admin_client.post(
        CHANGELIST, {"action": "cancel_pending", "_selected_action": ids}, follow=True
    )
    text = page.content.decode()
    assert "Cancelled 1 pause." in text and "1 pause was not pending" in text
    assert list(PausedRun.objects.values_list("tool_call_id", flat=True)) == ["claimed"]
    assert Event.objects.get(kind="pause.cancelled").actor == "root"


def test_pauses_cannot_be_added_and_final_ones_are_read_only(admin_client):
    pauses.put("chat", "pending", "alice", {"deep": {"x": [1, 2]}})
    pauses.put("chat", "expired", "alice", None)
    PausedRun.objects.filter(tool_call_id="expired").update(status="expired", expires_at=Now())
    assert admin_client.get(CHANGELIST + "add/").status_code == 403
    pending = PausedRun.objects.get(tool_call_id="pending")
    expired = PausedRun.objects.get(tool_call_id="expired")
    page = admin_client.get(f"{CHANGELIST}{pending.pk}/change/")
    assert page.status_code == 200 and "&quot;deep&quot;" in page.content.decode()
    assert (
        admin_client.post(f"{CHANGELIST}{pending.pk}/delete/", {"post": "yes"}).status_code == 403
    )
    page = admin_client.get(f"{CHANGELIST}{expired.pk}/change/")
    assert page.status_code == 200 and "View paused run" in page.content.decode()
    assert admin_client.post(f"{CHANGELIST}{expired.pk}/change/", {}).status_code == 403
