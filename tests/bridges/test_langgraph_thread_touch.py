"""A checkpoint put sets its thread's ``updated_at`` (indexed: each change is an index
entry) only when older than ``THREAD_TOUCH``, and the sweep of ``THREAD_TTL`` allows
for that."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from langgraph.checkpoint.base import empty_checkpoint

from agentstate.contrib.langgraph import AgentStateSaver
from agentstate.models import Thread
from agentstate.services.sweep import sweep
from agentstate.types import THREAD_TOUCH

pytestmark = pytest.mark.django_db


def put(saver, config):
    return saver.put(config, empty_checkpoint(), {"source": "loop", "step": 0}, {})


def test_a_put_touches_the_thread_at_most_once_per_thread_touch():
    saver = AgentStateSaver()
    config = put(saver, {"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    recent = timezone.now() - THREAD_TOUCH / 2
    Thread.objects.update(updated_at=recent)
    config = put(saver, config)
    assert Thread.objects.get().updated_at == recent  # recent enough: left alone
    Thread.objects.update(updated_at=timezone.now() - 2 * THREAD_TOUCH)
    put(saver, config)
    assert timezone.now() - Thread.objects.get().updated_at < THREAD_TOUCH / 2


def test_the_sweep_allows_for_the_lag():
    saver = AgentStateSaver()
    put(saver, {"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    ttl = timedelta(days=1)
    with override_settings(AGENTSTATE={"THREAD_TTL": ttl}):
        Thread.objects.update(updated_at=timezone.now() - ttl - THREAD_TOUCH / 2)
        assert sweep().purged_threads == 0  # may have been put less than ttl ago
        Thread.objects.update(updated_at=timezone.now() - ttl - 2 * THREAD_TOUCH)
        assert sweep().purged_threads == 1
