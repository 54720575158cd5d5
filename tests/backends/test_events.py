"""The event log: written with the change, listed only to those who may see it, read-only in the admin."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from agentstate.backends import events
from agentstate.models import Event, PausedRun, Run
from agentstate.types import Actor

pytestmark = pytest.mark.django_db

URL = "/api/events/"


def make_pause(chat_id: str, created_by=None, owner: str = "") -> PausedRun:
    return PausedRun.objects.create(
        chat_id=chat_id,
        tool_call_id="call",
        owner=owner or (created_by.username if created_by else "nobody"),
        created_by=created_by,
        expires_at=timezone.now() + timedelta(days=1),
    )


def record(kind: str, model, object_id: str, user=None, actor=None, **fields) -> Event:
    """An event saved as the backends save them, in the caller's transaction."""
    (event,) = events.save(
        "default", [events.new(kind, model, object_id, Actor.of(user, actor), **fields)]
    )
    return event


def record_pause(kind: str, pause: PausedRun, user=None) -> Event:
    return record(
        kind,
        PausedRun,
        f"{pause.chat_id}/{pause.tool_call_id}",
        user,
        created_by_id=pause.created_by_id,
        owner=pause.owner,
    )


def ids(response) -> list[str]:
    assert response.status_code == 200, response.json()
    return [row["object_id"] for row in response.json()["results"]]


def test_record_writes_the_event_with_who_what_and_which_object(alice):
    pause = make_pause("c1", created_by=alice)
    event = record_pause("pause.created", pause, user=alice)
    event.refresh_from_db()
    assert (event.kind, event.actor, event.user, event.object_type, event.object_id) == (
        "pause.created",
        "alice",
        alice,
        "pausedrun",
        "c1/call",
    )
    assert event.created_by == alice and event.owner == "alice" and event.created_at is not None


def test_record_in_a_rolled_back_transaction_leaves_no_event(alice):
    pause = make_pause("c1", created_by=alice)
    with pytest.raises(RuntimeError), transaction.atomic():
        record_pause("pause.claimed", pause, user=alice)
        raise RuntimeError("the change failed")
    assert not Event.objects.exists()


def test_explicit_actor_wins_over_the_user(alice):
    event = record("pause.claimed", PausedRun, "c1/call", alice, "agent-7")
    assert event.actor == "agent-7" and event.user == alice


def test_save_appends_one_event_per_row(alice):
    rows = [
        events.new("pause.expired", PausedRun, f"c{i}/call", Actor(None, "sweeper"), owner="alice")
        for i in range(3)
    ]
    created = events.save("default", rows)
    assert len(created) == 3 and all(event.pk for event in created)
    assert Event.objects.filter(kind="pause.expired", object_type="pausedrun").count() == 3


ROW = {
    "id": 7,
    "kind": "pause.expired",
    "actor": "sweeper",
    "user_id": None,
    "object_type": "pausedrun",
    "object_id": "c1#call",
    "created_by_id": 3,
    "owner": "alice",
    "details": {"question_id": "0f", "deep": [{"a": 1}]},
    "created_at": "2026-12-05T01:02:03.04+00:00",
}


def _fields(event: Event) -> dict:
    return {field.attname: getattr(event, field.attname) for field in Event._meta.concrete_fields}


def test_events_from_json_are_the_rows_as_from_db_builds_them():
    """The events a PostgreSQL function answers, built by one builder for the batch:
    each field's value and type as ``Model.from_db`` gives them, the keys that are no
    column (``delivery_ids``) attributes, none where the row has no ``delivery_ids``
    (``agentstate_record`` leaves it out when no delivery was written), a missing
    column deferred."""
    from agentstate.db import from_json as from_json_row

    rows = [
        ROW,
        {**ROW, "id": 8, "delivery_ids": [4, 5]},
        {k: v for k, v in ROW.items() if k != "details"},
    ]
    built = events.from_json(rows)
    one_by_one = [from_json_row(Event, row) for row in rows]
    for event, expected in zip(built[:2], one_by_one[:2], strict=True):
        assert _fields(event) == _fields(expected)
        assert type(event.created_at) is type(expected.created_at) and event.created_at.tzinfo
        assert not event._state.adding and event._state.db == "default"
    assert built[1].delivery_ids == [4, 5] and built[0].delivery_ids == []
    assert "details" not in built[2].__dict__ and built[2].get_deferred_fields() == {"details"}
    assert events.from_json([]) == []


def test_events_from_json_send_model_signals_when_listened_to():
    from django.db.models.signals import post_init

    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance.object_id)

    post_init.connect(receiver, sender=Event)
    try:
        (event,) = events.from_json([ROW])
    finally:
        post_init.disconnect(receiver, sender=Event)
    assert seen == ["c1#call"] and event.details == ROW["details"]


def test_anonymous_caller_is_refused(api_for):
    response = api_for(None).get(URL)
    assert response.status_code == 401 and response.json()["code"] == "not_authenticated"


def test_caller_sees_events_of_objects_it_created_or_owns_only(api_for, alice, bob, make_user):
    record_pause("pause.created", make_pause("mine", created_by=alice), user=alice)
    record_pause("pause.created", make_pause("for-alice", created_by=bob, owner="alice"), user=bob)
    record_pause("pause.created", make_pause("bobs", created_by=bob), user=bob)
    carol = make_user("carol")
    assert sorted(ids(api_for(alice).get(URL))) == ["for-alice/call", "mine/call"]
    assert sorted(ids(api_for(bob).get(URL))) == ["bobs/call", "for-alice/call"]
    assert ids(api_for(carol).get(URL)) == []


def test_events_stay_visible_to_the_creator_after_the_object_is_gone(api, alice):
    pause = make_pause("gone", created_by=alice)
    record_pause("pause.cancelled", pause, user=alice)
    pause.delete()
    assert ids(api.get(URL)) == ["gone/call"]


def test_model_view_permission_shows_every_event_of_that_model_only(api_for, alice, bob, make_user):
    record_pause("pause.created", make_pause("bobs", created_by=bob), user=bob)
    run = Run.objects.create(run_id="r1", created_by=bob)
    record("approvals.changed", Run, "r1", bob, created_by_id=run.created_by_id)
    auditor = make_user("auditor", "agentstate.view_pausedrun")
    assert ids(api_for(auditor).get(URL)) == ["bobs/call"]
    run_viewer = make_user("run-viewer", "agentstate.view_run")
    assert ids(api_for(run_viewer).get(URL)) == ["r1"]
    everything = make_user("everything", "agentstate.view_event")
    assert sorted(ids(api_for(everything).get(URL))) == ["bobs/call", "r1"]


def test_filters_by_object_and_kind(api, alice):
    first, second = make_pause("a", created_by=alice), make_pause("b", created_by=alice)
    record_pause("pause.created", first, user=alice)
    record_pause("pause.claimed", first, user=alice)
    record_pause("pause.created", second, user=alice)
    assert ids(api.get(URL, {"object_id": "a/call"})) == ["a/call", "a/call"]
    assert ids(api.get(URL, {"kind": "pause.claimed"})) == ["a/call"]
    assert ids(api.get(URL, {"object_type": "pausedrun", "kind": "pause.created"})) == [
        "b/call",
        "a/call",
    ]
    assert ids(api.get(URL, {"object_type": "run"})) == []


def test_newest_first_and_paginated(api, alice):
    for i in range(5):
        record_pause("pause.created", make_pause(f"c{i}", created_by=alice), user=alice)
    body = api.get(URL, {"page_size": 2}).json()
    assert (
        body["count"] == 5
        and len(body["results"]) == 2
        and body["next"]
        and body["previous"] is None
    )
    assert [row["object_id"] for row in body["results"]] == ["c4/call", "c3/call"]
    row = body["results"][0]
    assert set(row) == {
        "id",
        "kind",
        "actor",
        "user",
        "object_type",
        "object_id",
        "created_by",
        "owner",
        "details",
        "created_at",
    }


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"kind": "pause.exploded"}, "kind"),
        ({"object_type": "user"}, "object_type"),
        ({"object_id": ""}, "object_id"),
        ({"object_id": "x" * 512}, "object_id"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_query_is_a_400_naming_the_parameter(api, query, field):
    response = api.get(URL, query)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid" and response.json()["field"] == field


def test_events_are_read_only_over_rest(api):
    for method in ("post", "put", "patch", "delete"):
        response = getattr(api, method)(URL, {}, format="json")
        assert response.status_code == 405, method
    assert not Event.objects.exists()


# The admin


@pytest.fixture
def admin_client(client, make_user):
    make_user("root", is_staff=True, is_superuser=True)
    client.login(username="root", password="pw")
    return client


def test_admin_lists_filters_and_searches_events(admin_client, alice):
    record_pause("pause.created", make_pause("findme", created_by=alice), user=alice)
    record_pause("pause.created", make_pause("other", created_by=alice), user=alice)
    changelist = "/admin/agentstate/event/"
    assert admin_client.get(changelist).status_code == 200
    assert b"findme/call" in admin_client.get(changelist, {"kind": "pause.created"}).content
    found = admin_client.get(changelist, {"q": "findme"}).content
    assert b"findme/call" in found and b"other/call" not in found
    assert (
        b"findme/call"
        in admin_client.get(changelist, {"q": "alice", "object_type": "pausedrun"}).content
    )


def test_admin_cannot_add_change_or_delete_events(admin_client, alice):
    event = record_pause("pause.created", make_pause("c1", created_by=alice), user=alice)
    assert admin_client.get("/admin/agentstate/event/add/").status_code == 403
    page = admin_client.get(f"/admin/agentstate/event/{event.pk}/change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content
    admin_client.post(f"/admin/agentstate/event/{event.pk}/change/", {"kind": "pause.resolved"})
    assert (
        admin_client.post(
            f"/admin/agentstate/event/{event.pk}/delete/", {"post": "yes"}
        ).status_code
        == 403
    )
    event.refresh_from_db()
    assert event.kind == "pause.created"
