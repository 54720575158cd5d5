"""LangGraph's ``DeltaChannel`` (beta: a channel that stores its writes, with a
snapshot every few updates) on AgentStateSaver: a graph runs on it, its history
comes in one round trip on PostgreSQL, and ``prune`` keeps what it is rebuilt
from."""

import json
from typing import Annotated, TypedDict

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from agentstate.backends import chains
from agentstate.backends.base import SQUEEZED, squeezed, unpacked
from agentstate.contrib.langgraph import AgentStateSaver
from agentstate.contrib.langgraph import saver as saver_module
from agentstate.contrib.langgraph.saver import _compact, _expanded
from agentstate.models import Checkpoint, CheckpointBlob


def appended(state: list[str], writes: list[list[str]]) -> list[str]:
    return state + [item for write in writes for item in write]


class State(TypedDict):
    items: Annotated[list[str], DeltaChannel(appended, snapshot_frequency=3)]
    turn: int


def graph(saver):
    def add(state: State) -> dict:
        return {"items": [f"item {state['turn']}"], "turn": state["turn"]}

    builder = StateGraph(State)
    builder.add_node("add", add)
    builder.add_edge(START, "add")
    builder.add_edge("add", END)
    return builder.compile(checkpointer=saver)


def config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def run(app, thread: str, turns: int) -> dict:
    for turn in range(turns):
        out = app.invoke({"turn": turn}, config(thread))
    return out


# LangGraph puts from its own threads: their connections commit on their own.
@pytest.mark.django_db(transaction=True)
def test_a_graph_with_a_delta_channel_runs_and_its_history_is_the_base_walk():
    saver = AgentStateSaver()
    app = graph(saver)
    out = run(app, "delta", 8)
    assert out["items"] == [f"item {turn}" for turn in range(8)]
    assert app.get_state(config("delta")).values["items"] == out["items"]
    latest = saver.get_tuple(config("delta"))
    ours = saver.get_delta_channel_history(config=latest.config, channels=["items", "turn"])
    walked = BaseCheckpointSaver.get_delta_channel_history(
        saver, config=latest.config, channels=["items", "turn"]
    )
    assert ours == walked
    assert ours["items"]["writes"]  # not every step is a snapshot


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_history_is_one_round_trip_on_postgresql():
    saver = AgentStateSaver()
    run(graph(saver), "delta-trips", 8)
    latest = saver.get_tuple(config("delta-trips"))
    connection.ensure_connection()  # the saver uses this thread's own connection
    with CaptureQueriesContext(connection) as queries:
        saver.get_delta_channel_history(config=latest.config, channels=["items"])
    assert len(queries) == 1


# LangGraph puts from its own threads: their connections commit on their own.
@pytest.mark.django_db(transaction=True)
def test_writes_a_delta_channels_next_put_waits_for_stop_waiting_for_it():
    """LangGraph holds the put of a checkpoint until the writes to a DeltaChannel
    that made it are stored: such writes cannot wait for that put to store them.
    Once a child's put came just after its parent's writes went alone, the saver
    stops making writes wait for a child's put: it waits in vain a step or two,
    not every step."""
    saver = AgentStateSaver()
    carried, in_vain = saver._carried, []

    def counted(*args):
        outcome = carried(*args)
        if outcome is saver_module._Carried.NO_CHILD:
            in_vain.append(args[1])
        return outcome

    saver._carried = counted
    out = run(graph(saver), "delta-late", 6)
    assert out["items"] == [f"item {turn}" for turn in range(6)]
    assert len(in_vain) <= 2
    assert saver._children_wait or not in_vain


@pytest.mark.django_db(transaction=True)
def test_prune_keeps_what_a_delta_channel_is_rebuilt_from():
    saver = AgentStateSaver()
    app = graph(saver)
    run(app, "pruned", 8)
    before = app.get_state(config("pruned")).values["items"]
    saver.prune(["pruned"])
    assert Checkpoint.objects.filter(thread__thread_id="pruned").count() > 1  # ancestors kept
    assert app.get_state(config("pruned")).values["items"] == before
    out = app.invoke({"turn": 8}, config("pruned"))
    assert out["items"] == [*before, "item 8"]


@pytest.mark.django_db(transaction=True)
def test_a_long_value_is_stored_compressed_and_a_small_one_in_the_checkpoint():
    saver = AgentStateSaver()

    class Chat(TypedDict):
        text: list[str]
        count: int

    def talk(state: Chat) -> dict:
        return {"text": [*state["text"], "words " * 200], "count": state["count"] + 1}

    builder = StateGraph(Chat)
    builder.add_node("talk", talk)
    builder.add_edge(START, "talk")
    builder.add_edge("talk", END)
    app = builder.compile(checkpointer=saver)
    out = app.invoke({"text": [], "count": 0}, config("long"))
    assert app.get_state(config("long")).values == out
    records = [
        record
        for values in Checkpoint.objects.filter(thread__thread_id="long").values_list(
            "values", flat=True
        )
        for record in chains.decode(bytes(values))
    ]
    (text,) = [r for r in records if r[1] == "text" and r[2].startswith(SQUEEZED)]
    assert len(text[3]) < len("words " * 200)
    assert unpacked(text[2], text[3])[1].count(b"words ") == 200
    assert not [r for r in records if r[1] == "count"]
    assert not CheckpointBlob.objects.filter(thread__thread_id="long").exists()
    latest = Checkpoint.objects.filter(thread__thread_id="long").order_by("-checkpoint_id")[0]
    assert latest.checkpoint["channel_values"]["count"] == 1


@pytest.mark.parametrize(
    "version",
    [
        "00000000000000000000000000000150.0.8233388194969331",
        "00000000000000000000000000000001.0.0123",
        "99999999999999999999999999999999.0.5",
        "00000000000000000000000000000002.0000000000000.5",
        "150.8233388194969331",
        "0.5",
        "1.0.5",
        "v2",
        "",
        7,
        2.5,
    ],
)
def test_a_channel_version_is_stored_compact_and_read_back_as_put(version):
    stored = _compact(version)
    assert _expanded(json.loads(json.dumps(stored))) == version
    assert type(_expanded(stored)) is type(version)
    again = _compact(version)  # the second time from the process's memory: the same
    assert again == stored
    assert type(again) is not list or again is not stored  # a list is never shared


@pytest.mark.django_db(transaction=True)
def test_the_checkpoint_json_keeps_versions_compact_and_its_id_in_its_column():
    saver = AgentStateSaver()

    class Count(TypedDict):
        count: int

    builder = StateGraph(Count)
    builder.add_node("add", lambda state: {"count": state["count"] + 1})
    builder.add_edge(START, "add")
    builder.add_edge("add", END)
    builder.compile(checkpointer=saver).invoke({"count": 0}, config("compact"))
    row = Checkpoint.objects.filter(thread__thread_id="compact").order_by("-checkpoint_id")[0]
    assert "id" not in row.checkpoint
    versions = list(row.checkpoint["channel_versions"].values())
    assert versions and all(len(v) < 32 for v in versions if isinstance(v, str))
    got = saver.get_tuple(config("compact"))
    assert got.checkpoint["id"] == row.checkpoint_id
    assert all(len(v) > 32 for v in got.checkpoint["channel_versions"].values())


def test_a_small_message_is_squeezed_on_the_dictionary_and_read_back():
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    kind, raw = JsonPlusSerializer().dumps_typed([AIMessage("a short answer", id="m-1")])
    stored_kind, stored = squeezed(kind, raw)
    assert stored_kind == SQUEEZED + kind
    assert len(stored) < len(raw) / 2
    assert unpacked(stored_kind, stored) == (kind, raw)
    assert squeezed(kind, b"\x93\x01\x02\x03") == (kind, b"\x93\x01\x02\x03")


def _chain(*messages: bytes) -> list[bytes]:
    """A chain (nearest first) of one list grown by a message a checkpoint, as the
    saver puts it: a snapshot, then each checkpoint a delta on the one before."""
    values = [b"\x91" + messages[0]]
    data = [chains.encode([chains.full("messages", "msgpack", values[0])])]
    for count, message in enumerate(messages[1:], 2):
        grown = bytes([0x90 + count]) + values[-1][1:] + message
        values.append(grown)
        data.append(chains.encode([chains.delta("messages", "msgpack", values[-2], grown)]))
    return data[::-1]


def test_a_resolved_chain_is_read_again_from_the_process_memory_the_same():
    messages = [bytes([0xA5]) + f"m{n:04}".encode() * 20 for n in range(3)]
    chain = _chain(*messages)
    first = chains.resolve(chain)
    assert first == {"messages": ("msgpack", b"\x93" + b"".join(messages))}
    first["messages"] = ("msgpack", b"changed by its reader")
    assert chains.resolve(chain) == {"messages": ("msgpack", b"\x93" + b"".join(messages))}
    # the same bases under another checkpoint: that checkpoint's own values
    other = [chains.encode([chains.same("messages")]), *chain[1:]]
    assert chains.resolve(other) == {"messages": ("msgpack", b"\x92" + b"".join(messages[:2]))}
    # the same bytes on other bases are resolved on those
    assert chains.resolve([chain[0], chain[1]]) == {}


def test_the_process_memory_of_resolved_chains_keeps_to_its_limit():
    memory = chains._Resolved(limit=1000)
    for number in range(50):
        memory.add((0, bytes([number]) * 100), {"c": ("msgpack", b"x" * 100)})
    assert memory.size <= 1000
    # the bytes counted are the bytes the entries kept hold
    assert sum(chains._size(key, held) for key, (_, held) in memory.entries.items()) == memory.size
    assert memory.get((0, bytes([49]) * 100)) is not None  # the newest kept
    assert memory.get((0, bytes([0]) * 100)) is None  # the oldest gone
    big = memory.add((0, b"big"), {"c": ("msgpack", b"x" * 2000)})
    assert big[1] == {"c": ("msgpack", b"x" * 2000)}
    assert memory.get((0, b"big")) is None  # more than the limit: not kept
