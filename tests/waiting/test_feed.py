"""The event feed under concurrent writers: a follower that keeps asking with the
last id it got sees every event exactly once, in id order, although the writers'
transactions commit out of id order (each holds its transaction open a random
while after its event's id is drawn)."""

import random
import threading
import time

import pytest
from django.db import close_old_connections, connection, transaction

from agentstate.services import approvals, runs

from .servers import call

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS = 8
EACH = 15


def write(number: int, user, errors: list) -> None:
    try:
        rng = random.Random(number)
        for i in range(EACH):
            with transaction.atomic():
                approvals.request_approval(f"feed-{number}", "send", f"c{i}", by=user)
                time.sleep(rng.uniform(0, 0.05))  # committed later than ids drawn after it
    except Exception as error:  # noqa: BLE001 - reported by the test
        errors.append(error)
    finally:
        close_old_connections()
        connection.close()


def follow(server, token, after: int, stop: threading.Event, seen: list) -> None:
    while True:
        done = stop.is_set()
        status, body = call(server.url, token, f"/api/events/?after={after}&wait=0.5&page_size=500")
        assert status == 200, body
        ids = [event["id"] for event in body["results"]]
        seen.extend(ids)
        if ids:
            after = ids[-1]
        elif done:
            return


def test_a_follower_sees_every_event_once_in_id_order_under_concurrent_writers(server, make_user):
    from rest_framework.authtoken.models import Token

    writer = make_user("writer")
    token = Token.objects.create(user=make_user("auditor", is_superuser=True)).key
    for number in range(WRITERS):
        runs.create_run(f"feed-{number}", user=writer)
    from agentstate.models import Event

    start = Event.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    seen: list[int] = []
    errors: list = []
    stop = threading.Event()
    follower = threading.Thread(target=follow, args=(server, token, start, stop, seen))
    follower.start()
    threads = [threading.Thread(target=write, args=(n, writer, errors)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    follower.join(60)
    assert not errors, errors
    written = list(Event.objects.filter(pk__gt=start).order_by("pk").values_list("pk", flat=True))
    assert len(written) == WRITERS * EACH
    assert seen == written  # every one, once, in id order
