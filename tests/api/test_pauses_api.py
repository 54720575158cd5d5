"""The /api/pauses/ endpoints: codes and access rules."""

import uuid
from datetime import timedelta

import pytest
from django.db.models.functions import Now

from agentstate.models import Event, PausedRun
from agentstate.services import pauses

pytestmark = pytest.mark.django_db

URL = "/api/pauses/"
KEYS = {
    "chat_id",
    "tool_call_id",
    "owner",
    "question_id",
    "status",
    "payload",
    "created_at",
    "expires_at",
    "claimed_at",
    "claimed_by",
    "resolved_at",
}


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """The users here never log in with their password; hashing it slowly only costs time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def create(api, owner="alice", chat_id="chat", tool_call_id="call", payload=None, **extra):
    body = {
        "chat_id": chat_id,
        "tool_call_id": tool_call_id,
        "owner": owner,
        "payload": payload,
        **extra,
    }
    return api.post(URL, body, format="json")


def post(api, action, **body):
    return api.post(f"{URL}{action}/", body, format="json")


def error(response, status: int, code: str) -> bool:
    assert response.status_code == status, response.content
    assert response.json()["code"] == code, response.json()
    return True


def test_create_answers_201_with_the_pause(api):
    response = create(api, payload={"step": 1}, ttl_seconds=120)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert set(body) == KEYS
    assert (
        body["chat_id"],
        body["tool_call_id"],
        body["owner"],
        body["status"],
        body["payload"],
    ) == ("chat", "call", "alice", "pending", {"step": 1})
    pause = PausedRun.objects.get()
    assert body["question_id"] == str(pause.question_id)
    assert pause.expires_at - pause.created_at == timedelta(seconds=120)
    assert pause.created_by.username == "alice"


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"ttl_seconds": 0}, "ttl_seconds"),
        ({"ttl_seconds": 30 * 86400 + 1}, "ttl_seconds"),
        ({"ttl_seconds": "60"}, "ttl_seconds"),
        ({"ttl_seconds": 1.5}, "ttl_seconds"),
        ({"status": "claimed"}, "status"),
        ({"question_id": str(uuid.uuid4())}, "question_id"),
        ({"expires_at": "2100-01-01T00:00:00Z"}, "expires_at"),
        ({"chat_id": ""}, "chat_id"),
        ({"tool_call_id": "x" * 256}, "tool_call_id"),
        ({"owner": 5}, "owner"),
        ({"payload": {"a": "\x00"}}, "payload"),
    ],
)
def test_create_refuses_bad_or_read_only_fields(api, extra, field):
    response = create(api, **extra)
    assert error(response, 400, "invalid") and response.json()["field"].split(".")[0] == field
    assert not PausedRun.objects.exists()


def test_create_needs_owner_and_payload(api):
    response = api.post(
        URL, {"chat_id": "chat", "tool_call_id": "call", "payload": 1}, format="json"
    )
    assert error(response, 400, "invalid") and response.json()["field"] == "owner"
    response = api.post(
        URL, {"chat_id": "chat", "tool_call_id": "call", "owner": "alice"}, format="json"
    )
    assert error(response, 400, "invalid") and response.json()["field"] == "payload"


def test_ttl_seconds_up_to_max_pause_ttl(api, settings):
    settings.AGENTSTATE = {"MAX_PAUSE_TTL": 3600}
    assert create(api, ttl_seconds=3600).status_code == 201
    assert error(create(api, ttl_seconds=3601), 400, "invalid")


def test_creating_for_another_owner_needs_add_pausedrun(api_for, alice, make_user):
    assert error(create(api_for(alice), owner="agent-x"), 403, "permission_denied")
    assert not PausedRun.objects.exists()
    service = make_user("service", "agentstate.add_pausedrun")
    response = create(api_for(service), owner="agent-x")
    assert response.status_code == 201 and response.json()["owner"] == "agent-x"


def test_a_put_replacing_a_pause_the_caller_may_not_change_is_404_and_changes_nothing(
    api_for, alice, bob
):
    create(api_for(alice), payload={"v": 1})
    before = PausedRun.objects.values().get()
    assert error(create(api_for(bob), owner="bob", payload={"v": 2}), 404, "pause_not_found")
    assert PausedRun.objects.values().get() == before
    assert Event.objects.filter(kind="pause.created").count() == 1


def test_a_put_replacing_ones_own_pause_gives_a_new_question(api):
    first = create(api, payload={"v": 1}).json()
    second = create(api, payload={"v": 2}).json()
    assert second["question_id"] != first["question_id"] and second["status"] == "pending"
    response = post(
        api, "claim", chat_id="chat", tool_call_id="call", question_id=first["question_id"]
    )
    assert error(response, 409, "question_superseded")


def test_claim_answers_the_pause_with_its_payload(api):
    question = create(api, payload={"resume": [1, 2]}).json()["question_id"]
    response = post(api, "claim", chat_id="chat", tool_call_id="call", question_id=question)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert set(body) == KEYS
    assert (body["status"], body["payload"], body["claimed_by"]) == (
        "claimed",
        {"resume": [1, 2]},
        "alice",
    )
    assert body["claimed_at"] is not None


def test_claim_refusals_have_their_codes(api_for, alice, bob):
    api = api_for(alice)
    question = create(api).json()["question_id"]
    claim = {"chat_id": "chat", "tool_call_id": "call", "question_id": question}
    assert error(post(api, "claim", **{**claim, "tool_call_id": "nope"}), 404, "pause_not_found")
    assert error(post(api_for(bob), "claim", **claim), 404, "pause_not_found")  # another owner's
    assert error(
        post(api, "claim", **{**claim, "question_id": str(uuid.uuid4())}),
        409,
        "question_superseded",
    )
    assert error(post(api, "claim", **{**claim, "question_id": "junk"}), 409, "question_superseded")
    assert post(api, "claim", **claim).status_code == 200
    assert error(post(api, "claim", **claim), 409, "already_claimed")
    assert post(api, "resolve", chat_id="chat", tool_call_id="call").status_code == 200
    assert error(post(api, "claim", **claim), 409, "already_resolved")


def test_claim_of_an_overdue_pause_is_410_before_any_sweep(api):
    question = create(api).json()["question_id"]
    PausedRun.objects.update(expires_at=Now() - timedelta(seconds=1))
    response = post(api, "claim", chat_id="chat", tool_call_id="call", question_id=question)
    assert error(response, 410, "expired")
    assert PausedRun.objects.get().status == "pending"


def test_claiming_for_a_named_owner_needs_change_pausedrun(api_for, alice, make_user):
    question = create(api_for(alice)).json()["question_id"]
    claim = {"chat_id": "chat", "tool_call_id": "call", "question_id": question, "owner": "alice"}
    carol = make_user("carol")
    assert error(post(api_for(carol), "claim", **claim), 403, "permission_denied")
    agent = make_user("agent", "agentstate.change_pausedrun")
    response = post(api_for(agent), "claim", **claim)
    assert response.status_code == 200 and response.json()["claimed_by"] == "agent"
    assert error(
        post(api_for(alice), "claim", **claim), 409, "already_claimed"
    )  # naming yourself is fine


def test_claim_refuses_unknown_fields_and_status(api):
    question = create(api).json()["question_id"]
    response = post(
        api, "claim", chat_id="chat", tool_call_id="call", question_id=question, status="claimed"
    )
    assert error(response, 400, "invalid") and response.json()["field"] == "status"
    assert PausedRun.objects.get().status == "pending"


def test_resolve_and_cancel_rules_and_codes(api):
    question = create(api).json()["question_id"]
    key = {"chat_id": "chat", "tool_call_id": "call"}
    assert error(post(api, "resolve", **key), 409, "not_claimed")
    post(api, "claim", **key, question_id=question)
    assert error(post(api, "cancel", **key), 409, "not_pending")
    response = post(api, "resolve", **key)
    assert response.status_code == 200 and response.json()["status"] == "resolved"
    assert response.json()["resolved_at"] is not None
    assert error(post(api, "resolve", **key), 409, "not_claimed")
    assert error(post(api, "cancel", **key), 409, "not_pending")
    create(api, tool_call_id="other")
    response = post(api, "cancel", chat_id="chat", tool_call_id="other")
    assert response.status_code == 204 and not response.content
    assert error(post(api, "cancel", chat_id="chat", tool_call_id="other"), 404, "pause_not_found")
    assert error(post(api, "resolve", chat_id="chat", tool_call_id="other"), 404, "pause_not_found")


def test_creator_owner_and_change_pausedrun_may_resolve_and_cancel(api_for, make_user):
    creator = make_user("creator", "agentstate.add_pausedrun")
    owner, stranger = make_user("owner"), make_user("stranger")
    boss = make_user("boss", "agentstate.change_pausedrun")
    for who in (creator, owner, boss):
        question = create(api_for(creator), owner="owner", tool_call_id=who.username).json()[
            "question_id"
        ]
        post(
            api_for(owner), "claim", chat_id="chat", tool_call_id=who.username, question_id=question
        )
        key = {"chat_id": "chat", "tool_call_id": who.username}
        assert error(post(api_for(stranger), "resolve", **key), 404, "pause_not_found")
        assert post(api_for(who), "resolve", **key).status_code == 200
        create(api_for(creator), owner="owner", tool_call_id=f"c-{who.username}")
        key = {"chat_id": "chat", "tool_call_id": f"c-{who.username}"}
        assert error(post(api_for(stranger), "cancel", **key), 404, "pause_not_found")
        assert post(api_for(who), "cancel", **key).status_code == 204


def test_list_shows_what_the_caller_created_or_owns_with_payload(api_for, make_user):
    alice = make_user("alice", "agentstate.add_pausedrun")
    bob = make_user("bob")
    create(api_for(alice), tool_call_id="mine", payload={"p": 1})
    create(api_for(alice), owner="bob", tool_call_id="for-bob")
    create(api_for(bob), owner="bob", tool_call_id="bobs")
    seen = lambda user, query="": sorted(  # noqa: E731
        row["tool_call_id"] for row in api_for(user).get(URL + query).json()["results"]
    )
    assert seen(alice) == ["for-bob", "mine"]
    assert seen(bob) == ["bobs", "for-bob"]
    assert seen(make_user("carol")) == []
    assert seen(make_user("viewer", "agentstate.view_pausedrun")) == ["bobs", "for-bob", "mine"]
    body = api_for(alice).get(URL + "?tool_call_id=mine").json()
    assert body["count"] == 1 and body["next"] is None and body["previous"] is None
    assert set(body["results"][0]) == KEYS and body["results"][0]["payload"] == {"p": 1}
    assert seen(alice, "?owner=bob") == ["for-bob"]
    assert seen(alice, "?chat_id=nope") == []


def test_list_filters_by_status_read_by_the_database_clock(api):
    for call in ("a", "b", "c"):
        create(api, tool_call_id=call)
    PausedRun.objects.filter(tool_call_id="b").update(expires_at=Now() - timedelta(seconds=1))
    question = PausedRun.objects.get(tool_call_id="c").question_id
    post(api, "claim", chat_id="chat", tool_call_id="c", question_id=str(question))
    statuses = {row["tool_call_id"]: row["status"] for row in api.get(URL).json()["results"]}
    assert statuses == {"a": "pending", "b": "expired", "c": "claimed"}
    for wanted, calls in (
        ("pending", ["a"]),
        ("expired", ["b"]),
        ("claimed", ["c"]),
        ("resolved", []),
    ):
        rows = api.get(URL, {"status": wanted}).json()["results"]
        assert [row["tool_call_id"] for row in rows] == calls


@pytest.mark.parametrize("perms", [(), ("agentstate.view_pausedrun",)])
def test_a_listing_answers_the_same_bytes_on_either_backend(api_for, make_user, settings, perms):
    """On PostgreSQL the listing's fixed statement, and the ORM's QuerySet (which
    the other databases run) forced, answer every query alike, byte for byte."""
    alice, bob = make_user("alice", *perms), make_user("bob")
    for n in range(7):
        payload = {"n": n, "text": "\u00e9t\u00e9", "list": [n, None]}
        owner = "alice" if n % 3 else "bob"
        pauses.put_pause(f"c{n % 2}", f"t{n}", owner, payload, by=alice if n % 2 else bob)
    PausedRun.objects.filter(tool_call_id="t1").update(expires_at=Now() - timedelta(seconds=1))
    PausedRun.objects.filter(tool_call_id="t2").update(status="expired")
    api = api_for(alice)
    queries = [
        "",
        "?status=pending",
        "?status=expired&owner=alice",
        "?chat_id=c1&page_size=2",
        "?chat_id=c1&page_size=2&page=2",
        "?tool_call_id=t3",
        "?owner=bob&page=9",
        "?status=gone",
    ]
    answers = [api.get(f"{URL}{q}") for q in queries]
    settings.AGENTSTATE = {**settings.AGENTSTATE, "BACKEND": "agentstate.backends.orm.ORMBackend"}
    for q, answer in zip(queries, answers, strict=True):
        forced = api.get(f"{URL}{q}")
        assert (forced.status_code, forced.content) == (answer.status_code, answer.content), q
    assert [a.status_code for a in answers] == [200] * 6 + [404, 400]
    assert answers[0].json()["count"] == (7 if perms else 5)


def test_list_paginates(api):
    for i in range(5):
        create(api, tool_call_id=f"call-{i}")
    body = api.get(URL, {"page_size": 2}).json()
    assert body["count"] == 5 and len(body["results"]) == 2 and body["next"]


@pytest.mark.parametrize("query", ["?status=bogus", "?nope=1", "?chat_id="])
def test_list_refuses_bad_queries(api, query):
    assert error(api.get(URL + query), 400, "invalid")


@pytest.mark.parametrize("path", ["", "claim/", "resolve/", "cancel/"])
def test_anonymous_callers_are_refused(api_for, path):
    response = api_for(None).post(URL + path, {}, format="json")
    assert error(response, 401, "not_authenticated")


@pytest.mark.parametrize("path", ["", "claim/", "resolve/", "cancel/"])
def test_malformed_bodies_are_400(api, path):
    response = api.generic("POST", URL + path, "{nope", content_type="application/json")
    assert response.status_code == 400
    assert error(api.post(URL + path, [1, 2], format="json"), 400, "invalid")
