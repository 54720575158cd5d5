"""A checkpoint's put on the backend (on PostgreSQL, agentstate_put_checkpoint): the
cases a saver's ordinary puts do not reach, each checked on the stored rows."""

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from agentstate.contrib.langgraph import AgentStateSaver
from agentstate.exceptions import HistoryForked
from agentstate.models import Checkpoint, CheckpointWrite

ROOT = "1f0b0000-0000-6000-8000-000000000001"
OTHER_ROOT = "1f0b0000-0000-6000-8000-000000000002"
CHILD = "1f0b0000-0000-6000-8000-000000000003"


def put(backend, thread, checkpoint_id, parent=None, *, metadata=None, base=None, refuse=False):
    body = {**empty_checkpoint(), "id": checkpoint_id}
    body.pop("channel_values")
    return backend.put_checkpoint(
        thread, "", checkpoint_id, parent, body, metadata or {}, b"", base, refuse
    )


def row(checkpoint_id):
    return Checkpoint.objects.get(checkpoint_id=checkpoint_id)


@pytest.mark.django_db
def test_a_second_root_of_a_namespace_is_a_fork():
    backend = AgentStateSaver().backend
    assert not put(backend, "roots", ROOT).forked
    assert not put(backend, "roots", ROOT).forked  # put again: itself is no sibling
    with pytest.raises(HistoryForked) as refused:
        put(backend, "roots", OTHER_ROOT, refuse=True)
    assert ROOT in str(refused.value)  # the head named
    assert not Checkpoint.objects.filter(checkpoint_id=OTHER_ROOT).exists()
    assert put(backend, "roots", OTHER_ROOT).forked
    assert row(OTHER_ROOT).forked and not row(ROOT).forked


@pytest.mark.django_db
def test_a_put_on_a_base_no_longer_stored_writes_nothing_and_keeps_the_early_writes():
    saver = AgentStateSaver()
    stored = saver.put({"configurable": {"thread_id": "gone"}}, empty_checkpoint(), {}, {})
    early = {"configurable": {**stored["configurable"], "checkpoint_id": CHILD}}
    saver.put_writes(early, [("a", "early")], "task")
    assert CheckpointWrite.objects.filter(checkpoint_id=CHILD).count() == 1
    parent = stored["configurable"]["checkpoint_id"]
    done = put(saver.backend, "gone", CHILD, parent, base="1f0b0000-0000-6000-8000-0000000000ff")
    assert done.rebase and not done.forked
    assert not Checkpoint.objects.filter(checkpoint_id=CHILD).exists()
    assert CheckpointWrite.objects.filter(checkpoint_id=CHILD).count() == 1
    assert not put(saver.backend, "gone", CHILD, parent).rebase  # a snapshot takes them in
    assert not CheckpointWrite.objects.filter(checkpoint_id=CHILD).exists()
    assert [w[1:] for w in saver.get_tuple(early).pending_writes] == [("a", "early")]


@pytest.mark.django_db
def test_a_checkpoint_put_again_is_updated_and_keeps_its_writes_and_fork_mark():
    saver = AgentStateSaver()
    backend = saver.backend
    put(backend, "again", ROOT)
    put(backend, "again", CHILD, ROOT)
    config = {"configurable": {"thread_id": "again", "checkpoint_ns": "", "checkpoint_id": CHILD}}
    saver.put_writes(config, [("a", "kept")], "task")
    metadata = {"step": 7, "run_id": "r"}
    assert not put(backend, "again", CHILD, ROOT, metadata=metadata).forked
    assert (row(CHILD).step, row(CHILD).run_id, row(CHILD).metadata) == (7, "r", metadata)
    assert [w[1:] for w in saver.get_tuple(config).pending_writes] == [("a", "kept")]
    assert put(backend, "again", OTHER_ROOT, ROOT).forked  # ROOT's second child
    assert not put(backend, "again", OTHER_ROOT, CHILD).forked  # now CHILD's only child
    assert row(OTHER_ROOT).forked  # the mark of its first put stays
    assert row(OTHER_ROOT).parent_checkpoint_id == CHILD


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("step", "column"), [(3, 3), (-2, -2), (0, 0), (1.5, None), ("3", None), (True, None)]
)
def test_the_step_column_holds_the_metadata_step_when_an_integer(step, column):
    put(AgentStateSaver().backend, "steps", ROOT, metadata={"step": step})
    assert row(ROOT).step == column
