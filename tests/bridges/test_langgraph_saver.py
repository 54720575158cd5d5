"""AgentStateSaver passes LangGraph's conformance suite, as published, on this database."""

import pytest
from asgiref.sync import async_to_sync
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import (
    BASE_CAPABILITIES,
    EXTENDED_CAPABILITIES,
)
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from agentstate.contrib.langgraph import AgentStateSaver


@checkpointer_test(name="AgentStateSaver")
async def agentstate_saver():
    yield AgentStateSaver()


@pytest.mark.django_db(transaction=True)
def test_the_conformance_suite_passes_every_capability():
    report = async_to_sync(validate)(agentstate_saver, progress=ProgressCallbacks.verbose())
    results = {name: result.passed for name, result in report.results.items()}
    failures = {name: result.failures for name, result in report.results.items() if result.failures}
    assert failures == {}
    assert results == {cap.value: True for cap in BASE_CAPABILITIES | EXTENDED_CAPABILITIES}


# Beyond the suite: a real graph, forks, round trips, the admin and the sweep.

import asyncio  # noqa: E402
import operator  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from typing import Annotated, TypedDict  # noqa: E402

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext, override_settings  # noqa: E402
from django.utils import timezone  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import interrupt  # noqa: E402

from agentstate.backends import chains  # noqa: E402
from agentstate.contrib.langgraph import saver as saver_module  # noqa: E402
from agentstate.exceptions import HistoryForked  # noqa: E402
from agentstate.models import Checkpoint, CheckpointWrite, Thread  # noqa: E402
from agentstate.services.sweep import sweep  # noqa: E402


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def graph(saver, *, ask=False):
    def first(state):
        return {"log": ["first"]}

    def second(state):
        answer = interrupt("ok?") if ask else "yes"
        return {"log": [f"second:{answer}"]}

    builder = StateGraph(State)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder.compile(checkpointer=saver)


def config(thread="t1"):
    return {"configurable": {"thread_id": thread}}


# LangGraph puts from its own threads: their connections commit on their own.
@pytest.mark.django_db(transaction=True)
def test_a_graph_runs_resumes_and_keeps_its_history():
    app = graph(AgentStateSaver())
    assert app.invoke({"log": []}, config())["log"] == ["first", "second:yes"]
    assert app.invoke({"log": ["again"]}, config())["log"][-1] == "second:yes"
    history = list(app.get_state_history(config()))
    assert len(history) == 8
    assert not Checkpoint.objects.filter(forked=True).exists()


@pytest.mark.django_db(transaction=True)
def test_a_node_asking_twice_resumes_to_its_end():
    """LangGraph writes the node's ``__resume__`` once per answer in one call: the
    last is kept (PostgreSQL refused to write one row twice in one statement)."""
    from langgraph.types import Command

    from tests.langgraph_bridge_graphs import two_in_a_row

    app = two_in_a_row().compile(checkpointer=AgentStateSaver())
    assert app.invoke({"log": []}, config("twice"))["__interrupt__"][0].value == "first?"
    assert app.invoke(Command(resume="a"), config("twice"))["__interrupt__"][0].value == "second?"
    assert app.invoke(Command(resume="b"), config("twice")) == {"log": ["a", "b"]}


@pytest.mark.django_db
def test_a_checkpoints_metadata_is_stored_as_json_keeps_it():
    saver = AgentStateSaver()
    when = datetime(2026, 12, 5, tzinfo=UTC)
    plain = {"step": 1, "source": "loop", "parents": {"": "x"}, "score": 0.5, "tags": ["a", None]}
    odd = {
        "step": 2,
        "when": when,
        "pair": (1, 2),
        "by_number": {3: True},
        "nested": [{"at": when}],
    }
    for metadata, stored in [
        (plain, plain),
        (
            odd,
            {
                "step": 2,
                "when": str(when),
                "pair": [1, 2],
                "by_number": {"3": True},
                "nested": [{"at": str(when)}],
            },
        ),
    ]:
        checkpoint = {
            **empty_checkpoint(),
            "id": f"1f0a0000-0000-6000-8000-00000000000{metadata['step']}",
        }
        put = saver.put(config(), checkpoint, metadata, {})
        assert saver.get_tuple(put).metadata == stored
        assert Checkpoint.objects.get(checkpoint_id=checkpoint["id"]).metadata == stored


@pytest.mark.django_db
def test_a_second_writer_on_the_same_parent_is_noticed():
    saver = AgentStateSaver()
    root = saver.put(config(), empty_checkpoint(), {"step": -1}, {})
    first = {**empty_checkpoint(), "id": "1f0a0000-0000-6000-8000-000000000001"}
    second = {**empty_checkpoint(), "id": "1f0a0000-0000-6000-8000-000000000002"}
    saver.put(root, first, {"step": 0}, {})
    strict = AgentStateSaver(on_fork="raise")
    with pytest.raises(HistoryForked):
        strict.put(root, second, {"step": 0}, {})
    assert not Checkpoint.objects.filter(checkpoint_id=second["id"]).exists()
    saver.put(root, second, {"step": 0}, {})  # marked, kept, logged
    assert Checkpoint.objects.get(checkpoint_id=second["id"]).forked
    assert not Checkpoint.objects.get(checkpoint_id=first["id"]).forked


@pytest.mark.django_db
def test_a_write_kept_as_a_row_and_appended_again_is_read_once():
    """A task's writes sent while the put of their checkpoint was under way, and
    stored as rows that put did not take in, then sent again once it was stored:
    the checkpoint's pending writes hold each (task, idx) once, a special channel's
    last write, any other's first."""
    saver = AgentStateSaver()
    stored = saver.put(config("late"), empty_checkpoint(), {"step": -1}, {})
    checkpoint = Checkpoint.objects.get(checkpoint_id=stored["configurable"]["checkpoint_id"])
    serde = saver.serde
    for idx, channel, value in ((0, "a", "row"), (-3, "__interrupt__", "asked first")):
        kind, blob = serde.dumps_typed(value)
        CheckpointWrite.objects.create(
            thread=checkpoint.thread,
            checkpoint_ns="",
            checkpoint_id=checkpoint.checkpoint_id,
            task_id="task",
            task_path="",
            idx=idx,
            channel=channel,
            type=kind,
            blob=blob,
        )
    saver.put_writes(stored, [("a", "again"), ("__interrupt__", "asked again")], "task")
    found = saver.get_tuple(config("late"))
    assert sorted(w[1:] for w in found.pending_writes) == [
        ("__interrupt__", "asked again"),
        ("a", "row"),
    ]


def _held(checkpoint_id):
    """The bytes of pending writes a checkpoint's row holds."""
    return len(Checkpoint.objects.get(checkpoint_id=checkpoint_id).writes or b"")


@pytest.mark.django_db
def test_a_checkpoints_row_holds_at_most_held_writes_the_rest_go_to_rows():
    """Many tasks writing to one checkpoint (a fan-out): its row never holds more
    than ``HELD_WRITES`` bytes of writes, so that no call copies more than that, and
    the rest go to rows; every task's write is read back once."""
    saver = AgentStateSaver()
    stored = saver.put(config("fan-out"), empty_checkpoint(), {"step": -1}, {})
    checkpoint_id = stored["configurable"]["checkpoint_id"]
    sent = {f"task-{n:02}": os.urandom(1500) for n in range(30)}  # 45 KB, incompressible
    held = []
    for task, value in sent.items():
        saver.put_writes(stored, [("result", value)], task)
        held.append(_held(checkpoint_id))
    assert max(held) <= chains.HELD_WRITES
    assert CheckpointWrite.objects.filter(checkpoint_id=checkpoint_id).count() >= 20
    moved = held.index(0)
    assert any(held[moved:])  # after a move, the next calls are appended to the row again
    found = saver.get_tuple(stored).pending_writes
    assert sorted(found) == [(task, "result", value) for task, value in sent.items()]


@pytest.mark.django_db
def test_writes_moved_to_rows_keep_a_special_channels_last_write_and_any_others_first():
    """Rows are older than the writes a row holds, however often they move: a
    special channel's last write counts, any other's first, before and after a
    move, and after the checkpoint is put again, which takes its rows in."""
    saver = AgentStateSaver()
    first = empty_checkpoint()
    root = saver.put(config("moved"), first, {"step": -1}, {})
    checkpoint_id = first["id"]
    big = os.urandom(chains.HELD_WRITES)  # a call the row cannot hold: the writes move

    def pending():
        return sorted(
            (task, channel, len(value) if task.startswith("big") else value)
            for task, channel, value in saver.get_tuple(root).pending_writes
        )

    saver.put_writes(root, [("a", "first"), ("__interrupt__", "asked first")], "task")
    saver.put_writes(root, [("big", big)], "big-1")
    assert _held(checkpoint_id) == 0
    assert CheckpointWrite.objects.filter(checkpoint_id=checkpoint_id).count() == 3
    saver.put_writes(root, [("a", "again"), ("__interrupt__", "asked again")], "task")
    assert _held(checkpoint_id) > 0
    expected = [
        ("big-1", "big", len(big)),
        ("task", "__interrupt__", "asked again"),
        ("task", "a", "first"),
    ]
    assert pending() == expected
    saver.put_writes(root, [("big", big)], "big-2")  # the row's writes move over the rows
    assert _held(checkpoint_id) == 0
    expected.insert(1, ("big-2", "big", len(big)))
    assert pending() == expected
    saver.put_writes(root, [("__interrupt__", "asked last")], "task")
    saver.put(config("moved"), first, {"step": -1}, {})  # put again
    assert not CheckpointWrite.objects.filter(checkpoint_id=checkpoint_id).exists()
    expected[2] = ("task", "__interrupt__", "asked last")
    assert pending() == expected


@pytest.mark.django_db
def test_writes_sent_before_their_checkpoint_join_it_when_it_is_put():
    """LangGraph may send a step's writes before the put of its checkpoint: they
    wait as rows, every field as sent, and the put takes them in."""
    saver = AgentStateSaver()
    root = saver.put(config("early"), empty_checkpoint(), {"step": -1}, {})
    child = {**empty_checkpoint(), "id": "1f0a0000-0000-6000-8000-0000000000e1"}
    early = {"configurable": {**root["configurable"], "checkpoint_id": child["id"]}}
    saver.put_writes(early, [("a", "ünï"), ("__interrupt__", {"asked": [1, 2]})], "tâsk", "~path")
    saver.put_writes(early, [("__interrupt__", "asked again")], "tâsk", "~path")
    assert CheckpointWrite.objects.filter(checkpoint_id=child["id"]).count() == 2
    saver.put(root, child, {"step": 0}, {})
    assert not CheckpointWrite.objects.filter(checkpoint_id=child["id"]).exists()
    found = saver.get_tuple(early)
    assert sorted(found.pending_writes) == [
        ("tâsk", "__interrupt__", "asked again"),
        ("tâsk", "a", "ünï"),
    ]


def _held_first_put(saver, monkeypatch, first_id):
    """The saver's backend with its put of ``first_id`` held until ``release`` is
    set (``entered`` once it is), and its calls of put_checkpoint_writes counted."""
    backend = saver.backend
    entered, release, calls = threading.Event(), threading.Event(), []
    put_checkpoint, put_checkpoint_writes = backend.put_checkpoint, backend.put_checkpoint_writes

    def held(*args, **kwargs):
        if args[2] == first_id:
            entered.set()
            release.wait(10)
        return put_checkpoint(*args, **kwargs)

    def counted(*args, **kwargs):
        calls.append(args[2])
        return put_checkpoint_writes(*args, **kwargs)

    monkeypatch.setattr(backend, "put_checkpoint", held)
    monkeypatch.setattr(backend, "put_checkpoint_writes", counted)
    return entered, release, calls


def _waiting(saver, checkpoint_id, child=False):
    """Wait until a task's writes to ``checkpoint_id`` wait for its put (``child``:
    for its child's put)."""
    for _ in range(1000):
        if any(key[2] == checkpoint_id for key in (saver._late if child else saver._early)):
            return
        time.sleep(0.005)
    raise AssertionError("the writes never waited for a put")


FIRST = "1f0a0000-0000-6000-8000-0000000000f1"
SECOND = "1f0a0000-0000-6000-8000-0000000000f2"


@pytest.mark.django_db(transaction=True)
def test_writes_sent_before_their_checkpoints_put_began_are_stored_by_that_put(monkeypatch):
    """LangGraph puts a graph's checkpoints one after another and sends a step's
    writes as soon as its tasks end, often before the put of their checkpoint has
    begun: writes to a checkpoint newer than a put under way in the process wait
    for their checkpoint's put, which stores them with it (no call of their own,
    no rows)."""
    saver = AgentStateSaver()
    root = saver.put(config("carried"), empty_checkpoint(), {"step": -1}, {})
    entered, release, calls = _held_first_put(saver, monkeypatch, FIRST)
    first = threading.Thread(
        target=saver.put, args=(root, {**empty_checkpoint(), "id": FIRST}, {"step": 0}, {})
    )
    first.start()
    assert entered.wait(10)
    at_second = {"configurable": {**root["configurable"], "checkpoint_id": SECOND}}
    writes = threading.Thread(
        target=saver.put_writes, args=(at_second, [("a", "ünï"), ("__interrupt__", 2)], "task")
    )
    writes.start()
    _waiting(saver, SECOND)
    release.set()
    first.join(10)
    at_first = {"configurable": {**root["configurable"], "checkpoint_id": FIRST}}
    saver.put(at_first, {**empty_checkpoint(), "id": SECOND}, {"step": 1}, {})
    writes.join(10)
    assert not writes.is_alive()
    assert calls == []
    assert not CheckpointWrite.objects.filter(checkpoint_id=SECOND).exists()
    assert sorted(saver.get_tuple(at_second).pending_writes) == [
        ("task", "__interrupt__", 2),
        ("task", "a", "ünï"),
    ]


@pytest.mark.django_db(transaction=True)
def test_writes_sent_just_after_the_last_put_wait_for_the_next(monkeypatch):
    """Writes to a checkpoint newer than the one just put (LangGraph's next put
    is about to begin on another of its threads) wait for its put, which stores
    them."""
    monkeypatch.setattr(saver_module, "JUST_PUT", 10)
    saver = AgentStateSaver()
    root = saver.put(config("next"), empty_checkpoint(), {"step": -1}, {})
    entered, release, calls = _held_first_put(saver, monkeypatch, "none")
    at_first = saver.put(root, {**empty_checkpoint(), "id": FIRST}, {"step": 0}, {})
    at_second = {"configurable": {**root["configurable"], "checkpoint_id": SECOND}}
    writes = threading.Thread(target=saver.put_writes, args=(at_second, [("a", 1)], "task"))
    writes.start()
    _waiting(saver, SECOND)
    saver.put(at_first, {**empty_checkpoint(), "id": SECOND}, {"step": 1}, {})
    writes.join(10)
    assert not writes.is_alive()
    assert calls == []
    assert not CheckpointWrite.objects.filter(checkpoint_id=SECOND).exists()
    assert saver.get_tuple(at_second).pending_writes == [("task", "a", 1)]


@pytest.mark.django_db(transaction=True)
def test_the_async_methods_never_wait_for_a_put_to_come(monkeypatch):
    """The async methods run every call on one thread, one after another: their
    writes never wait for a put, which could only come after them."""
    monkeypatch.setattr(saver_module, "JUST_PUT", 30)
    saver = AgentStateSaver()
    entered, release, calls = _held_first_put(saver, monkeypatch, "none")

    async def steps():
        root = await saver.aput(config("async"), empty_checkpoint(), {"step": -1}, {})
        await saver.aput(root, {**empty_checkpoint(), "id": FIRST}, {"step": 0}, {})
        at_second = {"configurable": {**root["configurable"], "checkpoint_id": SECOND}}
        await asyncio.wait_for(saver.aput_writes(at_second, [("a", 1)], "task"), 10)

    async_to_sync(steps)()
    assert calls == [SECOND]
    assert CheckpointWrite.objects.filter(checkpoint_id=SECOND).count() == 1


@pytest.mark.django_db(transaction=True)
def test_writes_whose_checkpoint_is_not_put_soon_are_stored_alone(monkeypatch):
    """Writes waiting for a put that does not come (within CARRY_WAIT) are stored by
    their own call, as rows until their checkpoint is put."""
    monkeypatch.setattr(saver_module, "CARRY_WAIT", 0.05)
    saver = AgentStateSaver()
    root = saver.put(config("alone"), empty_checkpoint(), {"step": -1}, {})
    entered, release, calls = _held_first_put(saver, monkeypatch, FIRST)
    first = threading.Thread(
        target=saver.put, args=(root, {**empty_checkpoint(), "id": FIRST}, {"step": 0}, {})
    )
    first.start()
    try:
        assert entered.wait(10)
        at_second = {"configurable": {**root["configurable"], "checkpoint_id": SECOND}}
        saver.put_writes(at_second, [("a", 1)], "task")
        assert calls == [SECOND]
        assert CheckpointWrite.objects.filter(checkpoint_id=SECOND).count() == 1
        assert saver._early == {}
    finally:
        release.set()
        first.join(10)


@pytest.mark.django_db(transaction=True)
def test_writes_a_refused_put_could_not_store_are_stored_alone(monkeypatch):
    """A put refused (a fork, with on_fork="raise") stores none of the writes that
    waited for it: each is stored by its own call."""
    saver = AgentStateSaver(on_fork="raise")
    root = saver.put(config("refused"), empty_checkpoint(), {"step": -1}, {})
    saver.put(root, {**empty_checkpoint(), "id": "1f0a0000-0000-6000-8000-0000000000f0"}, {}, {})
    entered, release, calls = _held_first_put(saver, monkeypatch, FIRST)
    refused = []

    def put_first():
        try:
            saver.put(root, {**empty_checkpoint(), "id": FIRST}, {"step": 0}, {})
        except HistoryForked as error:
            refused.append(error)

    first = threading.Thread(target=put_first)
    first.start()
    assert entered.wait(10)
    at_second = {"configurable": {**root["configurable"], "checkpoint_id": SECOND}}
    writes = threading.Thread(target=saver.put_writes, args=(at_second, [("a", 1)], "task"))
    writes.start()
    _waiting(saver, SECOND)
    release.set()
    first.join(10)
    assert len(refused) == 1  # FIRST's parent, the root, already has a child
    with pytest.raises(HistoryForked):  # and so has SECOND's
        saver.put(root, {**empty_checkpoint(), "id": SECOND}, {"step": 1}, {})
    writes.join(10)
    assert calls == [SECOND]
    assert CheckpointWrite.objects.filter(checkpoint_id=SECOND).count() == 1


@pytest.mark.django_db(transaction=True)
def test_writes_sent_while_their_checkpoints_put_is_under_way_are_stored_by_its_childs(
    monkeypatch,
):
    """Writes to a checkpoint whose put is under way wait for it to end, then for
    the put of its child (LangGraph's next), which stores them on their checkpoint
    in its own call: no call of their own, no rows."""
    monkeypatch.setattr(saver_module, "JUST_PUT", 10)
    saver = AgentStateSaver()
    root = saver.put(config("late"), empty_checkpoint(), {"step": -1}, {})
    entered, release, calls = _held_first_put(saver, monkeypatch, FIRST)
    first = threading.Thread(
        target=saver.put, args=(root, {**empty_checkpoint(), "id": FIRST}, {"step": 0}, {})
    )
    first.start()
    assert entered.wait(10)
    at_first = {"configurable": {**root["configurable"], "checkpoint_id": FIRST}}
    writes = threading.Thread(target=saver.put_writes, args=(at_first, [("a", "ünï")], "task"))
    writes.start()
    _waiting(saver, FIRST, child=True)
    release.set()
    first.join(10)
    assert writes.is_alive()  # its checkpoint is put: it waits for the child's
    saver.put(at_first, {**empty_checkpoint(), "id": SECOND}, {"step": 1}, {})
    writes.join(10)
    assert not writes.is_alive()
    assert calls == []
    assert saver._late == {}
    assert not CheckpointWrite.objects.filter(checkpoint_id=FIRST).exists()
    assert saver.get_tuple(at_first).pending_writes == [("task", "a", "ünï")]


@pytest.mark.django_db(transaction=True)
def test_writes_to_the_checkpoint_just_put_are_stored_by_its_childs_put(monkeypatch):
    monkeypatch.setattr(saver_module, "JUST_PUT", 10)
    saver = AgentStateSaver()
    root = saver.put(config("just"), empty_checkpoint(), {"step": -1}, {})
    entered, release, calls = _held_first_put(saver, monkeypatch, "none")
    at_first = saver.put(root, {**empty_checkpoint(), "id": FIRST}, {"step": 0}, {})
    first_writes = threading.Thread(target=saver.put_writes, args=(at_first, [("a", 1)], "one"))
    first_writes.start()
    _waiting(saver, FIRST, child=True)
    # a second call for the same checkpoint does not wait: it is stored by its own
    saver.put_writes(at_first, [("b", 2)], "two")
    assert calls == [FIRST]
    saver.put(at_first, {**empty_checkpoint(), "id": SECOND}, {"step": 1}, {})
    first_writes.join(10)
    assert not first_writes.is_alive()
    assert calls == [FIRST]
    assert sorted(saver.get_tuple(at_first).pending_writes) == [("one", "a", 1), ("two", "b", 2)]


@pytest.mark.django_db(transaction=True)
def test_writes_to_a_put_checkpoint_whose_child_does_not_come_are_stored_alone(monkeypatch):
    """No child put within JUST_PUT (a graph that ends or stops there), or writes of
    a special channel (an interrupt: no child follows): their own call stores them,
    on their checkpoint's row."""
    monkeypatch.setattr(saver_module, "JUST_PUT", 0.2)
    saver = AgentStateSaver()
    root = saver.put(config("childless"), empty_checkpoint(), {"step": -1}, {})
    entered, release, calls = _held_first_put(saver, monkeypatch, "none")
    at_first = saver.put(root, {**empty_checkpoint(), "id": FIRST}, {"step": 0}, {})
    began = time.monotonic()
    saver.put_writes(at_first, [("__interrupt__", "asked")], "asking")
    assert time.monotonic() - began < 0.2  # no wait for a child
    assert calls == [FIRST]
    saver.put_writes(at_first, [("a", 1)], "task")  # waits JUST_PUT, then alone
    assert calls == [FIRST, FIRST]
    assert saver._late == {}
    assert not CheckpointWrite.objects.filter(checkpoint_id=FIRST).exists()
    assert sorted(saver.get_tuple(at_first).pending_writes) == [
        ("asking", "__interrupt__", "asked"),
        ("task", "a", 1),
    ]


@pytest.mark.django_db(transaction=True)
def test_writes_whose_childs_put_is_refused_are_stored_alone(monkeypatch):
    """A child's put refused (a fork, with on_fork="raise") stores none of its
    parent's writes that waited for it: their own call does."""
    monkeypatch.setattr(saver_module, "JUST_PUT", 10)
    saver = AgentStateSaver(on_fork="raise")
    root = saver.put(config("refused-child"), empty_checkpoint(), {"step": -1}, {})
    entered, release, calls = _held_first_put(saver, monkeypatch, "none")
    at_first = saver.put(root, {**empty_checkpoint(), "id": FIRST}, {"step": 0}, {})
    saver.put(at_first, {**empty_checkpoint(), "id": SECOND}, {"step": 1}, {})
    late = threading.Thread(target=saver.put_writes, args=(at_first, [("a", 1)], "task"))
    with saver._lock:  # as if FIRST had been put just now
        saver._last[("refused-child", "")] = saver._last[("refused-child", "")].__class__(
            FIRST, 0, {}, time.monotonic()
        )
    late.start()
    _waiting(saver, FIRST, child=True)
    with pytest.raises(HistoryForked):  # FIRST already has a child, SECOND
        saver.put(
            at_first, {**empty_checkpoint(), "id": "1f0a0000-0000-6000-8000-0000000000f3"}, {}, {}
        )
    late.join(10)
    assert not late.is_alive()
    assert calls == [FIRST]
    assert saver.get_tuple(at_first).pending_writes == [("task", "a", 1)]


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_the_hot_path_is_one_round_trip_each_on_postgresql():
    saver = AgentStateSaver()
    checkpoint = {**empty_checkpoint(), "channel_values": {"a": 1}, "channel_versions": {"a": "1"}}
    with CaptureQueriesContext(connection) as put:
        stored = saver.put(config(), checkpoint, {"step": 0}, {"a": "1"})
    with CaptureQueriesContext(connection) as writes:
        saver.put_writes(stored, [("a", 2), ("b", 3)], "task")
    with CaptureQueriesContext(connection) as read:
        found = saver.get_tuple(config())

    def calls(captured):  # inside the test's transaction each call is in a savepoint
        return [q for q in captured if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))]

    assert (len(calls(put)), len(calls(writes)), len(calls(read))) == (1, 1, 1)
    assert found.checkpoint["channel_values"] == {"a": 1}
    assert [w[1:] for w in found.pending_writes] == [("a", 2), ("b", 3)]


# LangGraph puts from its own threads: their connections commit on their own.
@pytest.mark.django_db(transaction=True)
def test_the_admin_shows_threads_and_decoded_checkpoints(client):
    app = graph(AgentStateSaver(), ask=True)
    app.invoke({"log": []}, config("asked"))
    admin = get_user_model().objects.create_superuser("root", password="pw")
    client.force_login(admin)
    assert client.get("/admin/agentstate/thread/").status_code == 200
    thread = Thread.objects.get(thread_id="asked")
    page = client.get(f"/admin/agentstate/thread/{thread.pk}/change/")
    assert page.status_code == 200
    latest = thread.checkpoints.order_by("-checkpoint_id").first()
    page = client.get(f"/admin/agentstate/checkpoint/{latest.pk}/change/").content.decode()
    assert "ok?" in page  # the pending interrupt, decoded
    assert "first" in page  # the channel values, decoded
    assert client.get("/admin/agentstate/checkpoint/").status_code == 200


# LangGraph puts from its own threads: their connections commit on their own.
@pytest.mark.django_db(transaction=True)
def test_the_sweep_deletes_threads_untouched_for_thread_ttl():
    app = graph(AgentStateSaver())
    app.invoke({"log": []}, config("old"))
    app.invoke({"log": []}, config("new"))
    assert sweep().purged_threads == 0  # THREAD_TTL unset: threads are kept
    Thread.objects.filter(thread_id="old").update(updated_at=timezone.now() - timedelta(days=2))
    with override_settings(AGENTSTATE={"THREAD_TTL": timedelta(days=1)}):
        assert sweep(batch_size=1).purged_threads == 1
    assert list(Thread.objects.values_list("thread_id", flat=True)) == ["new"]
    assert not Checkpoint.objects.filter(thread__thread_id="old").exists()
    assert AgentStateSaver().get_tuple(config("old")) is None
