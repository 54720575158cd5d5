"""Webhooks: signed the Standard Webhooks way, refused targets, retries, the REST API."""

import base64
import json
import os
import re
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from standardwebhooks import Webhook as Verifier

from agentstate import webhooks as sending
from agentstate.backends import events
from agentstate.models import Delivery, DeliveryAttempt, Event, Webhook
from agentstate.services import approvals, runs, webhooks
from tests.webhook_receiver import receiving

pytestmark = pytest.mark.django_db

ALLOW_PRIVATE = {"WEBHOOK_ALLOW_PRIVATE": True, "WEBHOOK_BACKOFF": 0.01, "WEBHOOK_TIMEOUT": 2}


def an_event(kind="approval.requested") -> Event:
    """An event saved as the backends save them: with its outbox."""
    (event,) = events.save(
        "default",
        [
            Event(
                kind=kind,
                object_type="approvalrequest",
                object_id="7",
                details={"tool_name": "mail"},
            )
        ],
    )
    return event


def a_delivery(hook: Webhook) -> Delivery:
    """The delivery to ``hook`` of a new event."""
    return Delivery.objects.get(webhook=hook, event=an_event())


def test_the_signature_verifies_with_the_standard_webhooks_library():
    secret = sending.new_secret()
    assert secret.startswith("whsec_")
    body = b'{"id":1}'
    headers = {
        "webhook-id": "msg-1",
        "webhook-timestamp": str(__import__("time").time().__int__()),
        "webhook-signature": sending.signature(
            secret, "msg-1", int(__import__("time").time()), body
        ),
    }
    assert Verifier(secret).verify(body, headers) == {"id": 1}
    with pytest.raises(Exception):  # noqa: B017 - the library's own verification error
        Verifier(sending.new_secret()).verify(body, headers)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/hook",
        "file:///etc/passwd",
        "http://127.0.0.1/hook",
        "http://localhost:8000/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://[fe80::1]/hook",
        "http:///nohost",
        "HtTP://\u009e",  # a control character for a host
        "http://exa mple.com/hook",
        "http://example.com/h\u00e9",  # not percent-encoded
        "http://example.com/%zz",
        "http://-example.com/hook",
        "http://example.com:99999/hook",
        "http://[::1/hook",  # a bracket not closed
        "http://[zz]/hook",  # no IPv6 address in the brackets
        "http://a]b/hook",
        "http://[fe80::1%25eth0]/hook",  # link-local with its zone
        "http://[::ffff:127.0.0.1]/hook",  # IPv4-mapped loopback
        "http://[64:ff9b::7f00:1]/hook",  # loopback through NAT64
        "http://[64:ff9b::a00:1]/hook",  # 10.0.0.1 through NAT64
    ],
)
def test_refused_targets(settings, url):
    settings.AGENTSTATE = {}
    with pytest.raises(sending.RefusedTarget) as refused:
        webhooks.create_webhook(url)
    assert refused.value.field == "url"
    assert not Webhook.objects.exists()


@pytest.mark.parametrize(
    "url",
    ["https://example.com:8443/a/b?c=1&d=%20#top", "http://EXAMPLE.com.", "http://93.184.216.34/"],
)
def test_what_the_schema_states_is_accepted(settings, url):
    """The API schema's URL pattern admits only URLs the server accepts."""
    settings.AGENTSTATE = {"WEBHOOK_ALLOW_PRIVATE": True}
    assert re.fullmatch(sending.URL_PATTERN, url)
    assert webhooks.create_webhook(url).url == url


def test_a_target_is_checked_again_at_every_attempt(settings):
    settings.AGENTSTATE = ALLOW_PRIVATE
    hook = webhooks.create_webhook("http://127.0.0.1:9/hook")
    delivery = a_delivery(hook)
    settings.AGENTSTATE = {**ALLOW_PRIVATE, "WEBHOOK_ALLOW_PRIVATE": False}
    assert webhooks.deliver(delivery.pk) is not None  # refused, to be tried again
    attempt = delivery.attempt_log.get()
    assert attempt.status_code is None and "private, loopback" in attempt.error


def test_a_receiver_answering_500_twice_gets_the_third_attempt(settings):
    settings.AGENTSTATE = ALLOW_PRIVATE
    secret_holder = webhooks.create_webhook("http://127.0.0.1:1/placeholder")
    with receiving(secret_holder.secret, statuses=[500, 500]) as receiver:
        Webhook.objects.filter(pk=secret_holder.pk).update(url=receiver.url)
        delivery = a_delivery(secret_holder)
        waits = []
        for _ in range(3):
            Delivery.objects.filter(pk=delivery.pk).update(
                next_attempt_at=Event.objects.get().created_at
            )
            waits.append(webhooks.deliver(delivery.pk))
    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.DELIVERED and delivery.attempts == 3
    assert waits[0] is not None and waits[1] > waits[0] * 1.3 and waits[2] is None
    assert [a.status_code for a in delivery.attempt_log.order_by("pk")] == [500, 500, 200]
    assert receiver.refused == 0 and len(receiver.received) == 3
    ids = {body["webhook-id"] for body in receiver.received}
    assert ids == {webhooks.message_id(delivery)}, "one webhook-id for every retry"
    body = receiver.received[-1]
    assert body["kind"] == "approval.requested" and body["data"]["details"] == {"tool_name": "mail"}


def test_a_delivery_out_of_attempts_fails_and_can_be_sent_again(settings):
    settings.AGENTSTATE = {**ALLOW_PRIVATE, "WEBHOOK_ATTEMPTS": 2}
    hook = webhooks.create_webhook("http://127.0.0.1:1/closed")  # nothing listens on port 1
    delivery = a_delivery(hook)
    for _ in range(2):
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=delivery.created_at)
        webhooks.deliver(delivery.pk)
    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.FAILED and delivery.attempt_log.count() == 2
    assert webhooks.send_again(Delivery.objects.all()) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (Delivery.Status.PENDING, 0)
    assert webhooks.due() == [delivery.pk]


def test_a_claimed_delivery_is_not_due_until_its_lease_runs_out(settings):
    settings.AGENTSTATE = ALLOW_PRIVATE
    hook = webhooks.create_webhook("http://127.0.0.1:1/closed")
    delivery = a_delivery(hook)
    assert webhooks.due() == [delivery.pk]
    claimed = Delivery.objects.filter(pk=delivery.pk)
    from django.db.models.functions import Now

    claimed.update(next_attempt_at=Now() + timedelta(minutes=1))  # as a claim leaves it
    assert webhooks.due() == [] and webhooks.deliver(delivery.pk) is None
    assert delivery.attempt_log.count() == 0


# REST


@pytest.fixture
def manager(make_user):
    return make_user("manager", "agentstate.change_webhook")


def test_managing_webhooks_takes_the_permission(api_for, alice):
    response = api_for(alice).get("/api/webhooks/")
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"


def test_the_secret_is_shown_once(api_for, manager, settings):
    settings.AGENTSTATE = ALLOW_PRIVATE
    api = api_for(manager)
    created = api.post(
        "/api/webhooks/",
        {"url": "http://127.0.0.1:9/hook", "kinds": ["approval.requested"]},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["secret"].startswith("whsec_") and body["kinds"] == ["approval.requested"]
    assert set(body) == {"id", "url", "kinds", "active", "created_at", "secret"}
    listed = api.get("/api/webhooks/").json()
    assert listed["count"] == 1 and "secret" not in listed["results"][0]
    deliveries = api.get(f"/api/webhooks/{body['id']}/deliveries/?status=failed").json()
    assert deliveries["count"] == 0
    assert api.delete(f"/api/webhooks/{body['id']}/").status_code == 204
    assert api.delete(f"/api/webhooks/{body['id']}/").status_code == 404
    assert api.get(f"/api/webhooks/{body['id']}/deliveries/").status_code == 404


@pytest.mark.parametrize(
    "body, field",
    [
        ({"url": "http://127.0.0.1/hook"}, "url"),
        ({"url": "gopher://example.com/"}, "url"),
        ({"url": "http://[::1/x", "active": False}, "url"),  # urlsplit's ValueError: was a 500
        ({"url": "https://example.com/", "kinds": ["no.such"]}, "kinds.0"),
        ({"url": "https://example.com/", "active": "yes"}, "active"),
        ({"url": "https://example.com/", "secret": "mine"}, "secret"),
    ],
)
def test_bad_webhooks_are_refused_and_nothing_is_stored(api_for, manager, body, field):
    response = api_for(manager).post("/api/webhooks/", body, format="json")
    assert response.status_code == 400 and response.json()["field"] == field, response.content
    assert not Webhook.objects.exists()


def test_deliveries_show_their_attempts(api_for, manager, settings):
    settings.AGENTSTATE = ALLOW_PRIVATE
    hook = webhooks.create_webhook("http://127.0.0.1:1/closed")
    delivery = a_delivery(hook)
    webhooks.deliver(delivery.pk)
    (row,) = api_for(manager).get(f"/api/webhooks/{hook.pk}/deliveries/").json()["results"]
    assert row["id"] == delivery.pk and row["kind"] == "approval.requested"
    assert row["status"] == "pending" and len(row["attempts"]) == 1
    assert set(row["attempts"][0]) == {"at", "status_code", "duration_ms", "error"}


def test_a_name_that_does_not_resolve_yet_is_accepted_and_checked_at_each_attempt(settings):
    settings.AGENTSTATE = {}
    hook = webhooks.create_webhook("https://hooks.invalid/agentstate")
    delivery = a_delivery(hook)
    assert webhooks.deliver(delivery.pk) is not None
    assert "cannot resolve" in delivery.attempt_log.get().error


def _docs_receiver() -> str:
    """The receiver example of the webhooks page, as printed there."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "webhooks.md").read_text()
    section = page.split("## A receiver", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_docs_receiver_example_verifies_and_acknowledges_a_delivery(settings, tmp_path):
    settings.AGENTSTATE = ALLOW_PRIVATE
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = _docs_receiver()
    assert '("", 8080)' in code
    script = tmp_path / "receiver.py"
    script.write_text(code.replace('("", 8080)', f'("127.0.0.1", {port})'))
    hook = webhooks.create_webhook(f"http://127.0.0.1:{port}/hook")
    env = {**os.environ, "WEBHOOK_SECRET": hook.secret, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        for _ in range(100):  # until it listens
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        delivery = a_delivery(hook)
        assert webhooks.deliver(delivery.pk) is None
        forged = webhooks.create_webhook(f"http://127.0.0.1:{port}/hook")  # another secret
        refused = a_delivery(forged)
        assert webhooks.deliver(refused.pk) is not None, "a bad signature is not acknowledged"
    finally:
        server.terminate()
        printed, _ = server.communicate(timeout=10)
    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.DELIVERED
    assert [a.status_code for a in delivery.attempt_log.all()] == [204]
    assert [a.status_code for a in refused.attempt_log.all()] == [400]
    assert printed.splitlines() == ["approval.requested {'tool_name': 'mail'}"]


# The admin


@pytest.fixture
def admin_client():
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "x"))
    return client


def test_a_webhook_added_in_the_admin_shows_its_secret_once(admin_client, settings):
    settings.AGENTSTATE = ALLOW_PRIVATE
    page = admin_client.post(
        "/admin/agentstate/webhook/add/",
        {"url": "http://127.0.0.1:9/hook", "kinds": '["approval.requested"]', "active": "on"},
        follow=True,
    )
    hook = Webhook.objects.get()
    assert hook.secret.startswith("whsec_") and hook.kinds == ["approval.requested"]
    assert hook.secret in page.content.decode()


def test_a_webhook_changed_in_the_admin_is_saved(admin_client, settings):
    settings.AGENTSTATE = ALLOW_PRIVATE
    hook = webhooks.create_webhook("http://127.0.0.1:9/hook")
    page = admin_client.post(
        f"/admin/agentstate/webhook/{hook.pk}/change/",
        {"url": "http://127.0.0.1:9/other", "kinds": "[]"},
    )
    assert page.status_code == 302, page.content
    hook.refresh_from_db()
    assert hook.url == "http://127.0.0.1:9/other" and not hook.active


@pytest.mark.parametrize(
    "body, says",
    [
        ({"url": "http://127.0.0.1:9/hook", "kinds": "[]"}, "private, loopback"),
        ({"url": "ftp://example.com/hook", "kinds": "[]"}, "only http and https"),
        ({"url": "https://example.com/hook", "kinds": '["no.such"]'}, "is no event kind"),
    ],
)
@pytest.mark.parametrize("change", [False, True])
def test_a_refused_webhook_in_the_admin_is_a_form_error(admin_client, settings, body, says, change):
    settings.AGENTSTATE = ALLOW_PRIVATE
    hook = webhooks.create_webhook("https://example.com/kept") if change else None
    settings.AGENTSTATE = {**ALLOW_PRIVATE, "WEBHOOK_ALLOW_PRIVATE": False}
    path = (
        f"/admin/agentstate/webhook/{hook.pk}/change/" if hook else "/admin/agentstate/webhook/add/"
    )
    page = admin_client.post(path, body)
    assert page.status_code == 200 and says in page.content.decode()
    assert list(Webhook.objects.values_list("url", flat=True)) == (
        ["https://example.com/kept"] if change else []
    )


# Handing deliveries to the broker


@pytest.fixture
def broker(tmp_path):
    """A Celery app of this process on the test broker (Redis when ``REDIS_URL`` is
    set, else the file-system transport in a temporary folder), and a way to read
    the messages waiting on it: each as its task's name and arguments."""
    from celery import Celery

    url = os.environ.get("REDIS_URL")
    app = Celery("handoff-test", set_as_current=False)
    if url:
        import redis

        app.conf.broker_url = url
        app.conf.task_default_queue = queue = f"handoff-{os.getpid()}-{time.monotonic_ns()}"
        client = redis.Redis.from_url(url)

        def raw() -> list[bytes]:
            return list(reversed(client.lrange(queue, 0, -1)))  # LPUSHed: oldest last

    else:
        folder = tmp_path / "broker"
        folder.mkdir()
        app.conf.broker_url = "filesystem://"
        app.conf.broker_transport = "project.broker:Transport"
        app.conf.broker_transport_options = {
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
        }

        def raw() -> list[bytes]:
            return [path.read_bytes() for path in sorted(folder.glob("*.msg"))]

    def waiting() -> list[tuple[str, list]]:
        messages = []
        for message in map(json.loads, raw()):
            body = message["body"]
            if message["properties"].get("body_encoding") == "base64":
                body = base64.b64decode(body)
            args, _kwargs, _embed = json.loads(body)
            messages.append((message["headers"]["task"], args))
        return messages

    previous = __import__("celery").current_app._get_current_object()  # not the proxy
    app.set_current()
    try:
        yield waiting
    finally:
        previous.set_current()
        if url:
            client.delete(queue)


def _carried(messages: list[tuple[str, list]]) -> list[int]:
    """The delivery ids of hand-off messages (``deliver_webhooks``), in order."""
    assert {task for task, _ in messages} <= {"agentstate.tasks.deliver_webhooks"}, messages
    return [delivery_id for _, (ids,) in messages for delivery_id in ids]


@pytest.mark.django_db(transaction=True)
def test_committed_deliveries_are_handed_to_the_broker_off_the_callers_path(broker, settings):
    from agentstate.tasks import handoff

    settings.AGENTSTATE = ALLOW_PRIVATE
    webhooks.create_webhook("http://127.0.0.1:9/hook", ["approval.requested"])
    webhooks.create_webhook("http://127.0.0.1:9/other", ["approval.requested"])
    run = runs.create_run("run-1")
    approvals.request_approval(run, "mail", "call-1", {})  # autocommit: handed over at once
    assert handoff.flush(30), "the publishing thread took them"
    written = sorted(Delivery.objects.values_list("pk", flat=True))
    assert len(written) == 2 and sorted(_carried(broker())) == written
    with pytest.raises(RuntimeError), transaction.atomic():
        approvals.request_approval(run, "mail", "call-2", {})
        raise RuntimeError("rolled back")
    assert handoff.flush(30), "the publishing thread is idle"
    assert sorted(_carried(broker())) == written, "a rolled-back change hands over nothing"
    assert Delivery.objects.count() == 2


def test_deliveries_handed_over_while_others_leave_share_a_message(broker, settings):
    """The first id after a quiet window leaves at once; what comes within the window
    (``WEBHOOK_BATCH_WINDOW``) after it leaves together, in one message, every id
    once and in order: here two messages, where the default window (50 ms) sends
    three."""
    from agentstate.tasks import handoff

    assert handoff.flush(30)
    settings.AGENTSTATE = {"WEBHOOK_BATCH_WINDOW": timedelta(seconds=1)}
    handoff.put([1])
    time.sleep(0.3)
    handoff.put(list(range(2, 12)))
    time.sleep(0.3)
    for start in range(12, 42, 10):
        handoff.put(list(range(start, start + 10)))
    assert handoff.flush(30)
    messages = broker()
    assert _carried(messages) == list(range(1, 42))
    assert [ids for _, (ids,) in messages] == [[1], list(range(2, 42))]


@pytest.mark.django_db
def test_a_batch_of_deliveries_is_queued_one_task_each_and_one_is_sent_at_once(broker, settings):
    """``deliver_webhooks`` of several ids queues ``deliver_webhook`` for each (a slow
    receiver holds up no other); of one id, it sends that one itself."""
    from agentstate.tasks import deliver_webhooks

    settings.AGENTSTATE = ALLOW_PRIVATE
    webhooks.create_webhook("http://127.0.0.1:9/closed", ["approval.requested"])
    run = runs.create_run("run-1")
    for call in ("call-1", "call-2", "call-3"):
        approvals.request_approval(run, "mail", call, {})
    first, *others = Delivery.objects.order_by("pk")
    deliver_webhooks.run([d.pk for d in others])
    assert broker() == [("agentstate.tasks.deliver_webhook", [d.pk]) for d in others]
    assert not DeliveryAttempt.objects.exists()
    deliver_webhooks.run([first.pk])  # the port is closed: one failed attempt, a retry queued
    assert list(DeliveryAttempt.objects.values_list("delivery", flat=True)) == [first.pk]
    assert broker()[-1] == ("agentstate.tasks.deliver_webhook", [first.pk])
