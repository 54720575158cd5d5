"""The webhook hand-off's broker connection (``agentstate.tasks._Publisher``): kept
across publishes and after the broker restarted, replaced for another app, and a
publish that cannot be made raised (the beat task makes it up)."""

import base64
import json

import pytest
import redis as redis_client

from agentstate.tasks import _Publisher, deliver_webhooks


def queued(url: str) -> list[list[int]]:
    """The ``deliver_webhooks`` messages waiting on the broker's default queue: each
    one's delivery ids, oldest first."""
    messages = redis_client.Redis.from_url(url).lrange("celery", 0, -1)
    bodies = []
    for raw in reversed(messages):  # kombu pushes on the left
        message = json.loads(raw)
        assert message["headers"]["task"] == deliver_webhooks.name
        args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        bodies.append(args[0])
    return bodies


def test_a_publisher_is_kept_and_publishes_after_its_broker_restarted(redis, broker):
    first = _Publisher.sending(None, broker, [1])
    assert _Publisher.sending(first, broker, [2]) is first, "kept while it publishes"
    assert queued(redis.url) == [[1], [2]]

    redis.kill()
    redis.start()  # empty, and the kept connection is gone
    after = _Publisher.sending(first, broker, [3])  # redis-py reconnects, or a new one
    assert queued(redis.url) == [[3]]
    assert _Publisher.sending(after, broker, [4]) is after
    assert queued(redis.url) == [[3], [4]]
    after.close()


def test_a_publisher_of_another_app_is_closed_and_replaced(redis, broker):
    from celery import Celery

    other = Celery("other", broker=redis.url)
    try:
        theirs = _Publisher.sending(None, other, [1])
        ours = _Publisher.sending(theirs, broker, [2])
        assert ours is not theirs and ours.app is broker
        assert queued(redis.url) == [[1], [2]]
        ours.close()
    finally:
        other.close()


def test_a_publish_with_the_broker_down_is_raised(redis, broker):
    kept = _Publisher.sending(None, broker, [1])
    redis.kill()
    with pytest.raises(Exception):  # noqa: B017, PT011 - kombu's or redis's, as it comes
        _Publisher.sending(kept, broker, [2])
