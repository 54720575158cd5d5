"""Paused runs through the Python API, rule by rule."""

import uuid
from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection, models
from django.db.models.functions import Now

from agentstate.backends.events import json_time
from agentstate.exceptions import (
    AlreadyClaimed,
    AlreadyResolved,
    BadInput,
    NotClaimed,
    NotPending,
    PauseExpired,
    PauseNotFound,
    QuestionSuperseded,
)
from agentstate.models import Event, PausedRun
from agentstate.services import pauses
from agentstate.services.sweep import sweep
from agentstate.types import Reach

pytestmark = pytest.mark.django_db


def overdue(chat_id: str = "chat", tool_call_id: str = "call") -> None:
    """Put the pause's expiry in the past by the database clock."""
    PausedRun.objects.filter(chat_id=chat_id, tool_call_id=tool_call_id).update(
        expires_at=Now() - timedelta(seconds=1)
    )


def status(chat_id: str = "chat", tool_call_id: str = "call") -> str:
    return PausedRun.objects.get(chat_id=chat_id, tool_call_id=tool_call_id).status


def kinds() -> list[str]:
    return list(Event.objects.order_by("pk").values_list("kind", flat=True))


def test_put_keeps_a_pending_pause_and_returns_its_question_id():
    question = pauses.put("chat", "call", "alice", {"step": 3, "args": [1, None]})
    pause = PausedRun.objects.get()
    assert str(pause.question_id) == question and uuid.UUID(question).version == 4
    assert (pause.status, pause.owner, pause.payload) == (
        "pending",
        "alice",
        {"step": 3, "args": [1, None]},
    )
    assert pause.claimed_at is None and pause.resolved_at is None and pause.claimed_by == ""
    assert kinds() == ["pause.created"]


def test_put_expires_after_the_default_ttl_by_the_database_clock(settings):
    settings.AGENTSTATE = {"PAUSE_TTL": timedelta(hours=5)}
    pauses.put("chat", "call", "alice", None)
    pause = PausedRun.objects.get()
    assert pause.expires_at - pause.created_at == timedelta(hours=5)


def test_put_with_a_ttl_in_seconds_or_a_timedelta():
    pauses.put("chat", "a", "alice", None, ttl=90)
    pauses.put("chat", "b", "alice", None, ttl=timedelta(minutes=2))
    a, b = PausedRun.objects.get(tool_call_id="a"), PausedRun.objects.get(tool_call_id="b")
    assert a.expires_at - a.created_at == timedelta(seconds=90)
    assert b.expires_at - b.created_at == timedelta(minutes=2)


@pytest.mark.parametrize("ttl", [0, -1, timedelta(0), "60", True])
def test_put_refuses_a_ttl_that_is_not_a_positive_duration(ttl):
    with pytest.raises(BadInput):
        pauses.put("chat", "call", "alice", None, ttl=ttl)
    assert not PausedRun.objects.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("", "call", "alice"),
        ("chat", "x" * 256, "alice"),
        ("chat", "call", ""),
        ("c\x00", "call", "a"),
    ],
)
def test_put_refuses_bad_keys_and_stores_nothing(args):
    with pytest.raises(BadInput):
        pauses.put(*args, payload=None)
    assert not PausedRun.objects.exists()


def test_put_refuses_a_payload_that_is_not_json():
    with pytest.raises(BadInput):
        pauses.put("chat", "call", "alice", {"x": float("nan")})
    assert not PausedRun.objects.exists()


@pytest.mark.parametrize("earlier", ["pending", "claimed", "resolved", "expired"])
def test_put_replaces_an_earlier_pause_whatever_its_status(earlier):
    first = pauses.put("chat", "call", "alice", {"v": 1}, ttl=60)
    if earlier in ("claimed", "resolved"):
        pauses.claim("chat", "call", "alice", first)
    if earlier == "resolved":
        pauses.resolve("chat", "call")
    if earlier == "expired":
        overdue()
        sweep()
    assert status() == earlier
    second = pauses.put("chat", "call", "bob", {"v": 2}, ttl=3600)
    pause = PausedRun.objects.get()
    assert second != first and str(pause.question_id) == second
    assert (pause.status, pause.owner, pause.payload) == ("pending", "bob", {"v": 2})
    assert pause.claimed_at is None and pause.claimed_by == "" and pause.resolved_at is None
    assert pause.expires_at - pause.created_at == timedelta(hours=1)
    event = Event.objects.filter(kind="pause.created").latest("pk")
    assert event.details["replaced"] == earlier and event.details["question_id"] == second


def test_re_pause_makes_the_older_question_stale():
    first = pauses.put("chat", "call", "alice", {"v": 1})
    second = pauses.put("chat", "call", "alice", {"v": 2})
    with pytest.raises(QuestionSuperseded):
        pauses.claim("chat", "call", "alice", first)
    assert status() == "pending"
    assert pauses.claim("chat", "call", "alice", second) == {"v": 2}


def test_claim_returns_the_payload_once_and_records_who_and_when():
    question = pauses.put("chat", "call", "alice", [1, 2, 3])
    assert pauses.claim("chat", "call", "alice", question) == [1, 2, 3]
    pause = PausedRun.objects.get()
    assert pause.status == "claimed" and pause.claimed_by == "alice"
    assert pause.claimed_at >= pause.created_at
    assert kinds() == ["pause.created", "pause.claimed"]


def test_claim_accepts_the_question_as_a_uuid_in_any_spelling():
    question = pauses.put("chat", "call", "alice", None)
    assert (
        pauses.claim_pause("chat", "call", "alice", uuid.UUID(question).hex.upper()).status
        == "claimed"
    )


def test_claim_of_a_missing_pause_is_not_found():
    with pytest.raises(PauseNotFound):
        pauses.claim("chat", "call", "alice", uuid.uuid4())


def test_claim_of_another_owners_pause_is_not_found_and_changes_nothing():
    question = pauses.put("chat", "call", "alice", None)
    with pytest.raises(PauseNotFound):
        pauses.claim("chat", "call", "bob", question)
    assert status() == "pending"


def test_claim_of_a_superseded_question_is_refused():
    pauses.put("chat", "call", "alice", None)
    with pytest.raises(QuestionSuperseded):
        pauses.claim("chat", "call", "alice", str(uuid.uuid4()))
    with pytest.raises(QuestionSuperseded):
        pauses.claim("chat", "call", "alice", "not a uuid")
    assert status() == "pending"


def test_second_claim_is_already_claimed():
    question = pauses.put("chat", "call", "alice", None)
    pauses.claim("chat", "call", "alice", question)
    with pytest.raises(AlreadyClaimed):
        pauses.claim("chat", "call", "alice", question)


def test_claim_after_resolve_is_already_resolved():
    question = pauses.put("chat", "call", "alice", None)
    pauses.claim("chat", "call", "alice", question)
    pauses.resolve("chat", "call")
    with pytest.raises(AlreadyResolved):
        pauses.claim("chat", "call", "alice", question)


def test_expiry_is_enforced_at_claim_time_before_any_sweep():
    question = pauses.put("chat", "call", "alice", None)
    overdue()
    with pytest.raises(PauseExpired):
        pauses.claim("chat", "call", "alice", question)
    assert status() == "pending"  # nothing changed; the sweep will mark it
    assert sweep().expired_pauses == 1
    with pytest.raises(PauseExpired):
        pauses.claim("chat", "call", "alice", question)
    assert status() == "expired"


def test_refusal_reasons_come_in_the_specs_order():
    question = pauses.put("chat", "call", "alice", None)
    pauses.claim("chat", "call", "alice", question)
    overdue()
    # another owner and a wrong question: not found first
    with pytest.raises(PauseNotFound):
        pauses.claim("chat", "call", "bob", uuid.uuid4())
    # a wrong question on a claimed, overdue pause: superseded first
    with pytest.raises(QuestionSuperseded):
        pauses.claim("chat", "call", "alice", uuid.uuid4())
    # claimed and overdue: already claimed before expired
    with pytest.raises(AlreadyClaimed):
        pauses.claim("chat", "call", "alice", question)
    pauses.resolve("chat", "call")
    with pytest.raises(AlreadyResolved):
        pauses.claim("chat", "call", "alice", question)


def test_claim_by_a_named_actor_records_it():
    question = pauses.put("chat", "call", "alice", None)
    pause = pauses.claim_pause("chat", "call", "alice", question, by="agent-7")
    assert pause.claimed_by == "agent-7"
    assert Event.objects.get(kind="pause.claimed").actor == "agent-7"


def test_resolve_only_from_claimed():
    question = pauses.put("chat", "call", "alice", None)
    with pytest.raises(NotClaimed):
        pauses.resolve("chat", "call")
    pauses.claim("chat", "call", "alice", question)
    pause = pauses.resolve("chat", "call")
    assert pause.status == "resolved" and pause.resolved_at is not None
    with pytest.raises(NotClaimed):
        pauses.resolve("chat", "call")
    with pytest.raises(PauseNotFound):
        pauses.resolve("chat", "other")
    assert kinds() == ["pause.created", "pause.claimed", "pause.resolved"]


@pytest.mark.parametrize("swept", [True, False])
def test_resolve_of_an_expired_pause_is_not_claimed_and_says_expired(swept):
    pauses.put("chat", "call", "alice", None)
    overdue()
    if swept:
        sweep()
    with pytest.raises(NotClaimed) as refused:
        pauses.resolve("chat", "call")
    assert refused.value.detail == "The pause is expired, not claimed."
    assert status() == ("expired" if swept else "pending")


def test_cancel_removes_a_pending_pause():
    pauses.put("chat", "call", "alice", {"x": 1})
    removed = pauses.cancel("chat", "call", by="ops")
    assert removed.payload == {"x": 1}
    assert not PausedRun.objects.exists()
    event = Event.objects.get(kind="pause.cancelled")
    assert (event.object_id, event.actor, event.owner) == ("chat#call", "ops", "alice")
    with pytest.raises(PauseNotFound):
        pauses.cancel("chat", "call")


@pytest.mark.parametrize("state", ["claimed", "resolved", "expired", "overdue"])
def test_cancel_of_a_pause_that_is_not_pending_is_refused(state):
    question = pauses.put("chat", "call", "alice", None)
    if state in ("claimed", "resolved"):
        pauses.claim("chat", "call", "alice", question)
    if state == "resolved":
        pauses.resolve("chat", "call")
    if state in ("expired", "overdue"):
        overdue()
    if state == "expired":
        sweep()
    before = PausedRun.objects.values().get()
    with pytest.raises(NotPending):
        pauses.cancel("chat", "call")
    assert PausedRun.objects.values().get() == before


def test_with_current_status_reads_an_overdue_pending_pause_as_expired():
    pauses.put("chat", "a", "alice", None)
    pauses.put("chat", "b", "alice", None)
    overdue("chat", "b")
    current = dict(
        pauses.with_current_status(PausedRun.objects.all()).values_list(
            "tool_call_id", "current_status"
        )
    )
    assert current == {"a": "pending", "b": "expired"}


def test_the_events_of_put_and_claim_say_what_was_written_and_what_the_signal_carries(
    django_capture_on_commit_callbacks,
):
    from agentstate import signals

    sent = []

    def receiver(sender, event, **kwargs):
        sent.append(event)

    signals.event_recorded.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            question = pauses.put("chat", "call", "alice", {"v": 1}, ttl=60, by="agent")
            pauses.claim("chat", "call", "alice", question)
    finally:
        signals.event_recorded.disconnect(receiver)
    pause = PausedRun.objects.get()
    created, claimed = Event.objects.order_by("pk")
    assert created.details == {"question_id": question, "expires_at": json_time(pause.expires_at)}
    assert datetime.fromisoformat(created.details["expires_at"]) == pause.expires_at
    assert (created.actor, created.owner, created.object_id) == ("agent", "alice", "chat#call")
    assert claimed.details == {"question_id": question}
    assert (claimed.actor, claimed.owner) == ("alice", "alice")
    assert [(e.pk, e.kind, e.details, e.created_at) for e in sent] == [
        (e.pk, e.kind, e.details, e.created_at) for e in (created, claimed)
    ]


@pytest.mark.parametrize(
    "micro, text",
    [(828170, "08:46:54.82817+00:00"), (0, "08:46:54+00:00"), (5, "08:46:54.000005+00:00")],
)
def test_event_times_read_as_postgresql_writes_them(micro, text):
    moment = datetime(2026, 12, 3, 9, 46, 54, micro, tzinfo=timezone(timedelta(hours=1)))
    assert json_time(moment) == f"2026-12-03T{text}"
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_jsonb(%s::timestamptz) #>> '{}'", [moment])
            assert cursor.fetchone()[0] == json_time(moment)


@pytest.mark.postgres_only
@pytest.mark.parametrize("micro", [828170, 0, 5])
def test_event_times_written_in_sql_read_in_utc_whatever_the_sessions_time_zone(micro):
    moment = datetime(2026, 12, 3, 9, 46, 54, micro, tzinfo=timezone(timedelta(hours=1)))
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL TimeZone = 'Asia/Kolkata'")
        cursor.execute("SELECT agentstate_json_time(%s)", [moment])
        assert cursor.fetchone()[0] == json_time(moment)


def test_an_operation_reaches_the_pauses_created_or_owned_by_the_caller(bob):
    pauses.put("chat", "created", "alice", 1, by=bob)
    pauses.put("chat", "owned", "bob", 2)
    pauses.put("chat", "other", "carol", 3)
    reach = Reach(bob.pk, "bob")
    before = list(PausedRun.objects.order_by("pk").values())
    for refused in (
        lambda: pauses.put_pause("chat", "other", "bob", 4, by=bob, reach=reach),
        lambda: pauses.resolve("chat", "other", reach=reach),
        lambda: pauses.cancel("chat", "other", reach=reach),
        lambda: pauses.cancel("chat", "other", reach=Reach(None, "bob")),
    ):
        with pytest.raises(PauseNotFound):
            refused()
    assert list(PausedRun.objects.order_by("pk").values()) == before
    assert pauses.cancel("chat", "created", reach=reach).payload == 1
    assert pauses.put_pause("chat", "owned", "bob", 5, reach=Reach(None, "bob")).payload == 5
    assert pauses.cancel("chat", "owned", reach=Reach(None, "bob")).payload == 5


@pytest.fixture
def listed(make_user):
    """Pauses of every current status, made and owned by several callers, two sharing
    a ``created_at`` (the id then orders them)."""
    alice, bob = make_user("alice"), make_user("bob")
    for n, (owner, creator) in enumerate(
        [("alice", alice), ("bob", alice), ("bob", bob), ("carol", bob), ("alice", None)] * 2
    ):
        pauses.put_pause(f"chat-{n % 3}", f"call-{n}", owner, {"n": n, "z": [n]}, by=creator)
    question = pauses.put("chat-9", "claimed", "carol", None, by=bob)
    pauses.claim("chat-9", "claimed", "carol", question)
    question = pauses.put("chat-9", "resolved", "alice", None, by=alice)
    pauses.claim("chat-9", "resolved", "alice", question)
    pauses.resolve("chat-9", "resolved")
    overdue("chat-0", "call-0")
    overdue("chat-1", "call-4")
    sweep()
    overdue("chat-2", "call-5")  # pending past its expiry, not swept: reads expired
    first, second = PausedRun.objects.order_by("pk")[:2]
    PausedRun.objects.filter(pk=second.pk).update(created_at=first.created_at)
    return alice, bob


def reference(filters: dict, reach: Reach | None) -> list[PausedRun]:
    """The listing as a QuerySet says it: what ``pauses_page`` must answer."""
    rows = pauses.with_current_status(PausedRun.objects.all())
    if reach is not None:  # a reach without a user: the pauses its name owns
        created = models.Q(created_by_id=reach.user_id) if reach.user_id else models.Q(pk=None)
        rows = rows.filter(created | models.Q(owner=reach.username))
    rows = rows.filter(**{k: v for k, v in filters.items() if k != "status"})
    if "status" in filters:
        rows = rows.filter(pauses.in_status(filters["status"]))
    return list(rows.order_by("-created_at", "-pk"))


def shown(page: list[PausedRun]) -> list[tuple]:
    """Every field of each row, and its current status."""
    fields = [f.attname for f in PausedRun._meta.concrete_fields]
    return [(*(getattr(p, f) for f in fields), p.current_status) for p in page]


FILTERS = [
    {},
    {"owner": "alice"},
    {"owner": "bob", "chat_id": "chat-2"},
    {"chat_id": "chat-1"},
    {"tool_call_id": "call-3"},
    {"chat_id": "chat-0", "tool_call_id": "call-0", "owner": "alice"},
    {"owner": "nobody"},
    *({"status": status} for status in PausedRun.Status.values),
    {"status": "expired", "owner": "alice"},
    {"status": "pending", "chat_id": "chat-2", "owner": "bob"},
]


def test_a_page_of_pauses_is_the_listing_s_query_on_every_backend(listed):
    """On PostgreSQL its fixed statements and the ORM's QuerySet (the other
    databases') answer alike, for every filter and reach; both as a QuerySet says."""
    from agentstate.backends import backend
    from agentstate.backends.orm import ORMBackend

    alice, bob = listed
    backends = [backend(), ORMBackend(connection.alias)]
    reaches = [None, Reach(alice.pk, "alice"), Reach(bob.pk, "bob"), Reach(None, "carol")]
    seen = set()
    for filters in FILTERS:
        for reach in reaches:
            expected = reference(filters, reach)
            seen.update(p.current_status for p in expected)
            for offset, limit in [(0, 50), (0, 3), (2, 3), (len(expected), 5), (40, 5)]:
                rows = expected[offset : offset + limit]
                for answering in backends:
                    page = answering.pauses_page(filters, reach, offset, limit)
                    assert shown(page.rows) == shown(rows), (answering, filters, reach)
                    assert page.total == (len(expected) if rows else 0)
    assert seen == set(PausedRun.Status.values)


def test_pauses_page_checks_its_arguments(listed):
    alice, _ = listed
    page = pauses.pauses_page(reach=Reach(alice.pk, "alice"), limit=2, owner="alice")
    assert page.total == 5 and len(page.rows) == 2
    for bad in [
        {"status": "gone"},
        {"colour": "red"},
        {"owner": ""},
        {"chat_id": "x" * 10_000},
        {"owner": 1},
        {"limit": 0},
        {"offset": -1},
    ]:
        with pytest.raises(BadInput):
            pauses.pauses_page(**{"limit": 5, **bad})
