"""``AgentStateSaver``: LangGraph's checkpointer on agentstate's tables.

A checkpoint is kept as a ``Checkpoint`` row (the checkpoint as JSON with
only its channels' small values, and its metadata), each other channel's value
once per version as a ``CheckpointBlob`` and each pending write as a
``CheckpointWrite``, all under the thread's ``Thread`` row, through the
database's storage backend (``agentstate.backends``): on PostgreSQL a put, a
task's writes and a read are one round trip each.

What is stored is small: a value JSON holds as it is (``None``, a bool, a
number, a string; ``INLINE``) stays in the checkpoint's JSON, as LangGraph's
own savers keep it, rather than a row of its own; an emptied channel has no
row; a value of at least ``COMPRESS_FROM`` bytes is stored compressed when
that saves a fifth (``agentstate.backends.base.packed``).

Two writers of one thread cannot fork its history unnoticed: the puts of a
thread queue on its row, and a checkpoint whose parent already has a child
(or a second root) is a fork, kept marked ``forked`` and logged, or refused
as ``HistoryForked`` with ``on_fork="raise"``.
"""

from __future__ import annotations

import builtins
import enum
import functools
import json
import logging
import math
import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from asgiref.sync import sync_to_async
from django.db import DEFAULT_DB_ALIAS
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from agentstate.backends import Backend, backend, chains
from agentstate.backends.base import packed, unpacked
from agentstate.types import StoredCheckpoint, Write, WriteCall

from .connections import LENDS, Borrowed

logger = logging.getLogger(__name__)

STRATEGIES = ("keep_latest", "delete")

# The threads' namespaces whose last put a saver remembers (``_Last``).
REMEMBERED = 256
# How long a task's writes wait for their checkpoint's put to take them (``_Early``)
# before they go alone: LangGraph puts it right after the put under way.
CARRY_WAIT = 0.5
# Writes to a checkpoint newer than the one this process put last on the thread's
# namespace, at most this many seconds ago, wait as long for their put to begin:
# LangGraph's next put is about to. So do writes to the checkpoint put last, or
# whose put is under way, once it has ended: its child's put takes them.
JUST_PUT = 0.05


# ``json.dumps(value, default=str, ensure_ascii=False)``'s encoder, made once rather
# than by each call (``jsonable``: three a conversation turn)
_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False)


def jsonable(value: Any) -> Any:
    """``value`` as JSON keeps it (what JSON cannot hold as its text)."""
    return json.loads(_ENCODER.encode(value))


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is made only of what ``jsonable`` gives back equal (and of
    the same types): dicts with string keys, lists, strings, ints, floats, bools
    and ``None`` (those types exactly), nested at most 16 deep."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return True
    if depth == 16:
        return False
    if kind is dict:
        return all(type(key) is str and _plain(item, depth + 1) for key, item in value.items())
    if kind is list:
        return all(_plain(item, depth + 1) for item in value)
    return False


def inline(value: Any) -> bool:
    """Whether a channel's value stays in the checkpoint's JSON: one JSON holds
    as it is and gives back the same (``jsonb`` holds no U+0000, nor NaN)."""
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return True
    if kind is str:
        return "\x00" not in value
    return kind is float and math.isfinite(value)


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


@dataclass(eq=False)
class _Early:
    """A task's writes (one call's) to a checkpoint whose put, or whose child's
    put, this process is about to make: that put takes them (``taken``) and stores
    them with it (``stored``); ``ended`` is set when it is over."""

    call: WriteCall
    taken: bool = False
    stored: bool = False
    ended: threading.Event = field(default_factory=threading.Event)


class _Carried(enum.Enum):
    """What became of a task's writes that may ride with a put (``_carried``)."""

    STORED = enum.auto()  # a put stored them
    ALONE = enum.auto()  # no put did: they are stored by a call of their own
    NO_CHILD = enum.auto()  # the same, after waiting for their checkpoint's child in vain


@dataclass(frozen=True)
class _Last:
    """A checkpoint this saver put: its id, how many bases it has, and its values
    as serialized, ``{channel: (version, type, bytes)}``."""

    checkpoint_id: str
    depth: int
    values: dict[str, tuple[str, str, bytes]]
    # when the put ended (``time.monotonic``)
    ended: float = 0.0


# A channel version as ``get_next_version`` makes it: a 32-digit counter, ".0.", digits.
_VERSION = re.compile(r"(\d{32})\.0\.(\d+)")
# Such a version as a checkpoint's JSON keeps it: the counter without its zeros, ".", the digits.
_COMPACT = re.compile(r"\d+\.\d+")


def _compact(version: Any) -> Any:
    """A channel version as the checkpoint's JSON keeps it: one ``get_next_version``
    made as ``"<counter>.<digits>"`` (``"150.8233388194969331"`` for
    ``"00000000000000000000000000000150.0.8233388194969331"``, 20 bytes for 51); any
    other as it is, unless it looks like that form: then in a list of its own."""
    if type(version) is str:
        compact = _compact_text(version)
        # a list is made anew for each use: the checkpoint's JSON may be changed
        return [version] if compact is None else compact
    return version


@functools.lru_cache(maxsize=4096)
def _compact_text(version: str) -> str | None:
    """``_compact`` of a string, kept for the next puts (a checkpoint repeats most of
    its parent's versions, each in ``channel_versions`` and ``versions_seen``):
    ``None`` for one to keep in a list of its own."""
    if found := _VERSION.fullmatch(version):
        return f"{int(found[1])}.{found[2]}"
    if _COMPACT.fullmatch(version):
        return None
    return version


def _expanded(version: Any) -> Any:
    """A channel version as it was put: ``_compact`` undone."""
    if type(version) is list:
        return version[0]
    if type(version) is str and _COMPACT.fullmatch(version):
        counter, digits = version.split(".")
        return f"{int(counter):032}.0.{digits}"
    return version


def _stored_body(rest: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint (without its values) as its JSON is stored: its versions compacted
    (``_compact``), its id left to its row's column."""
    body = {key: value for key, value in rest.items() if key != "id"}
    if "channel_versions" in body:
        body["channel_versions"] = {
            channel: _compact(version) for channel, version in body["channel_versions"].items()
        }
    if "versions_seen" in body:
        body["versions_seen"] = {
            node: {channel: _compact(version) for channel, version in seen.items()}
            for node, seen in body["versions_seen"].items()
        }
    return body


def _put_body(stored: StoredCheckpoint) -> dict[str, Any]:
    """A checkpoint's JSON as it was put: ``_stored_body`` undone for one stored so
    (with ``values_held``), one of an earlier release as it is."""
    body = {key: value for key, value in stored.checkpoint.items() if key != "values_held"}
    if "values_held" not in stored.checkpoint:
        return body
    body["id"] = stored.checkpoint_id
    if "channel_versions" in body:
        body["channel_versions"] = {
            channel: _expanded(version) for channel, version in body["channel_versions"].items()
        }
    if "versions_seen" in body:
        body["versions_seen"] = {
            node: {channel: _expanded(version) for channel, version in seen.items()}
            for node, seen in body["versions_seen"].items()
        }
    return body


class AgentStateSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer on agentstate's tables of the database ``using``
    (default: Django's default database).

    ``on_fork``: what a put does whose parent already goes on in another
    checkpoint (another writer of the thread was first, or a replay from an
    earlier checkpoint): ``"mark"`` (the default) keeps it, marked ``forked``
    and logged as a warning; ``"raise"`` refuses it with
    ``agentstate.exceptions.HistoryForked``, nothing written.

    ``connections``: how many database connections a process lends at once to
    the calls of threads without an open one of their own, such as LangGraph's
    threads of a sync ``invoke`` (default 2: an invoke's calls overlap by two);
    a process running many sync graphs at once from such threads may want more.
    """

    def __init__(
        self,
        *,
        using: str | None = None,
        serde: SerializerProtocol | None = None,
        on_fork: Literal["mark", "raise"] = "mark",
        connections: int = LENDS,
    ) -> None:
        super().__init__(serde=serde)
        if on_fork not in ("mark", "raise"):
            raise ValueError("on_fork must be 'mark' or 'raise'.")
        self.using = using or DEFAULT_DB_ALIAS
        self.on_fork = on_fork
        self.borrowed = Borrowed(self.using, connections)
        # a saver no longer used closes its idle connections (Django's ``close_all``
        # does not know them), rather than leave each to be found on its own
        self.borrowed.close_with(self)
        # the values this saver last put on each thread's namespace, what the next
        # put on that checkpoint stores its own on (``agentstate.backends.chains``)
        self._last: OrderedDict[tuple[str, str], _Last] = OrderedDict()
        # the puts under way in this process, by thread's namespace and checkpoint id,
        # each set when it ends; and the task writes waiting for their checkpoint's
        # put to take them (``put_writes``)
        self._puts: dict[tuple[str, str], dict[str, threading.Event]] = {}
        self._early: dict[tuple[str, str, str], builtins.list[_Early]] = {}
        # and those to a checkpoint whose put began, waiting for its child's put;
        # when such writes last went alone for want of one, by their checkpoint
        self._late: dict[tuple[str, str, str], builtins.list[_Early]] = {}
        self._late_alone: dict[tuple[str, str, str], float] = {}
        # set once a child's put came just after its parent's late writes went alone:
        # LangGraph held it for them (a DeltaChannel's writes, an error handler's),
        # so no writes wait for a child's put from then on
        self._children_wait = False
        self._lock = threading.Lock()

    @property
    def backend(self) -> Backend:
        return backend(self.using)

    # Reading

    def _loads(self, kind: str, blob: bytes) -> Any:
        return self.serde.loads_typed(unpacked(kind, blob))

    def _dumps(self, value: Any) -> tuple[str, bytes]:
        return packed(*self.serde.dumps_typed(value))

    def _tuple(self, stored: StoredCheckpoint) -> CheckpointTuple:
        loads = self._loads
        body = _put_body(stored)
        checkpoint = {
            **body,
            "channel_values": {
                **{channel: loads(kind, blob) for channel, kind, blob in stored.blobs},
                **stored.checkpoint.get("channel_values", {}),
            },
        }
        writes = sorted(stored.writes, key=lambda w: writes_sort_key(w[4], w[0], w[5]))
        parent = stored.parent_checkpoint_id
        return CheckpointTuple(
            config=_config(stored.thread_id, stored.checkpoint_ns, stored.checkpoint_id),
            checkpoint=cast(Checkpoint, checkpoint),
            metadata=cast(CheckpointMetadata, stored.metadata),
            parent_config=(
                None if parent is None else _config(stored.thread_id, stored.checkpoint_ns, parent)
            ),
            pending_writes=[
                (task_id, channel, loads(kind, blob))
                for task_id, channel, kind, blob, _path, _idx in writes
            ],
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        with self.borrowed.connection():
            stored = self.backend.checkpoint(
                configurable["thread_id"],
                configurable.get("checkpoint_ns", ""),
                get_checkpoint_id(config),
            )
        return None if stored is None else self._tuple(stored)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        if limit is not None and limit <= 0:
            return
        configurable = (config or {}).get("configurable", {})
        with self.borrowed.connection():
            found = self.backend.checkpoints(
                configurable.get("thread_id"),
                configurable.get("checkpoint_ns"),
                get_checkpoint_id(config) if config else None,
                jsonable(filter) if filter else None,
                get_checkpoint_id(before) if before else None,
                limit,
            )
        for stored in found:
            yield self._tuple(stored)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """What LangGraph's ``DeltaChannel`` rebuilds its value from: the writes to
        each channel along the checkpoint's ancestors and the nearest one's stored
        value (``seed``), as ``BaseCheckpointSaver`` defines it; on PostgreSQL in
        one round trip, whatever the number of ancestors."""
        if not channels:
            return {}
        configurable = config["configurable"]
        with self.borrowed.connection():
            chain = self.backend.checkpoint_history(
                configurable["thread_id"],
                configurable.get("checkpoint_ns", ""),
                get_checkpoint_id(config),
                list(channels),
            )
        collected: dict[str, list[Any]] = {channel: [] for channel in channels}
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        for stored in chain:
            ancestor = self._tuple(stored)
            for write in reversed(ancestor.pending_writes or []):
                if write[1] in remaining:
                    collected[write[1]].append(write)
            values = ancestor.checkpoint["channel_values"]
            for channel in [c for c in remaining if c in values]:
                seeds[channel] = values[channel]
                remaining.discard(channel)
        history: dict[str, DeltaChannelHistory] = {}
        for channel in channels:
            entry: DeltaChannelHistory = {"writes": list(reversed(collected[channel]))}
            if channel in seeds:
                entry["seed"] = seeds[channel]
            history[channel] = entry
        return history

    # Writing

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id = configurable["thread_id"]
        checkpoint_ns = configurable.get("checkpoint_ns", "")
        rest: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = rest.pop("channel_values", {})
        small = {channel: value for channel, value in values.items() if inline(value)}
        parent = configurable.get("checkpoint_id")
        body = _stored_body(rest)
        body["channel_values"] = small
        meta = cast(dict[str, Any], get_serializable_checkpoint_metadata(config, metadata))
        if not _plain(meta):  # as JSON keeps it: a plain one is already, as it is
            meta = jsonable(meta)
        key = (thread_id, checkpoint_ns)
        with self._lock:
            last = self._last.get(key)
        on = (
            last
            if last is not None
            and parent is not None
            and last.checkpoint_id == parent != checkpoint["id"]
            and last.depth + 1 < chains.CHAIN
            else None
        )
        with self._putting(key, checkpoint["id"], parent) as (early, late):
            while True:
                records, held = self._records(values, small, checkpoint["channel_versions"], on)
                body["values_held"] = sorted(held)
                with self.borrowed.connection():
                    done = self.backend.put_checkpoint(
                        thread_id,
                        checkpoint_ns,
                        checkpoint["id"],
                        parent,
                        body,
                        meta,
                        chains.encode(records),
                        None if on is None else on.checkpoint_id,
                        self.on_fork == "raise",
                        b"".join(chains.encode_writes(*e.call) for e in early) or None,
                        [e.call for e in late] or None,
                    )
                if not done.rebase or on is None:
                    break
                on = None  # its base was deleted since: a snapshot instead
            for e in (*early, *late):
                e.stored = True
            # remembered before the put stops being under way: writes that come in
            # between see one or the other (``_carried``)
            with self._lock:
                self._last[key] = _Last(
                    checkpoint["id"],
                    0 if on is None else on.depth + 1,
                    held,
                    time.monotonic(),
                )
                self._last.move_to_end(key)
                while len(self._last) > REMEMBERED:
                    self._last.popitem(last=False)
        if done.forked:
            logger.warning(
                "LangGraph thread %r (namespace %r) forked: checkpoint %s put on %s, "
                "which already had a child",
                thread_id,
                checkpoint_ns,
                checkpoint["id"],
                parent,
            )
        return _config(thread_id, checkpoint_ns, checkpoint["id"])

    @contextmanager
    def _putting(
        self, key: tuple[str, str], checkpoint_id: str, parent: str | None
    ) -> Iterator[tuple[builtins.list[_Early], builtins.list[_Early]]]:
        """The put of ``checkpoint_id`` (a child of ``parent``) on the thread's
        namespace ``key``, under way: the task writes to it waiting for it, and those
        to its parent waiting for a child's put (``put_writes``), taken to be stored
        with it (each ``stored`` when it is), each told when it is over."""
        ended = threading.Event()
        with self._lock:
            self._puts.setdefault(key, {})[checkpoint_id] = ended
            early = self._early.pop((*key, checkpoint_id), [])
            late = [] if parent is None else self._late.pop((*key, parent), [])
            for e in (*early, *late):
                e.taken = True
            alone = None if parent is None else self._late_alone.pop((*key, parent), None)
            if alone is not None and time.monotonic() - alone < JUST_PUT:
                self._children_wait = True
        try:
            yield early, late
        finally:
            with self._lock:
                under_way = self._puts[key]
                if under_way.get(checkpoint_id) is ended:
                    del under_way[checkpoint_id]
                if not under_way:
                    del self._puts[key]
            ended.set()
            for e in (*early, *late):
                e.ended.set()

    def _carried(self, key: tuple[str, str], checkpoint_id: str, call: WriteCall) -> _Carried:
        """What became of a task's writes (one ``call``'s) to ``checkpoint_id``:
        stored by a put made in this process, their checkpoint's or its child's
        (``STORED``), or to be stored by a call of their own (``ALONE``;
        ``NO_CHILD`` after waiting for a child's put that did not come).

        LangGraph runs a graph's puts and its tasks' writes on threads of their own,
        each put after the one before, and sends a step's writes as soon as its
        tasks end: often before the put of their checkpoint has begun, or while it
        is under way. Writes to one newer than a put under way (LangGraph's ids
        grow with time) wait for their put to begin, at most ``CARRY_WAIT``
        seconds, and to one newer than the put that ended last, at most
        ``JUST_PUT`` seconds after it, wait ``JUST_PUT``: that put takes them. Writes
        to a checkpoint whose put is under way, or to the one put last at most
        ``JUST_PUT`` seconds ago, wait for it to end, then ``JUST_PUT`` for the put
        of its child, which takes them: one call at a time for a checkpoint, and
        none that writes a special channel (an error, an interrupt: no child
        follows); none at all once a child's put came just after such writes went
        alone (LangGraph holds a put for the writes that made it, a
        ``DeltaChannel``'s and an error handler's). Either saves the database a
        call of their own, and its commit."""
        special = chains.special(call[2])
        with self._lock:
            under_way = self._puts.get(key, {})
            put = under_way.get(checkpoint_id)
            last = self._last.get(key)
            # the checkpoint put last, if that put ended at most JUST_PUT ago
            recent = (
                last.checkpoint_id
                if last is not None and time.monotonic() - last.ended < JUST_PUT
                else None
            )
            waiting, wait = None, JUST_PUT
            # one call at most waits for a child's put: LangGraph's pool, which runs
            # that put too, keeps threads for it
            late = (
                None
                if special or self._children_wait or (*key, checkpoint_id) in self._late
                else self._late
            )
            if put is not None:
                waiting = late
            elif any(other < checkpoint_id for other in under_way):
                waiting, wait = self._early, CARRY_WAIT
            elif recent is not None and recent < checkpoint_id:
                waiting = self._early
            elif recent == checkpoint_id:
                waiting = late
            early = None
            if waiting is not None:
                early = _Early(call)
                waiting.setdefault((*key, checkpoint_id), []).append(early)
        if put is not None:
            put.wait()  # a call of their own would wait for it in the database
        if early is None or waiting is None:
            return _Carried.ALONE
        early.ended.wait(wait)
        with self._lock:
            if not early.taken:  # no put came for them: they go alone
                kept = waiting[(*key, checkpoint_id)]
                kept.remove(early)
                if not kept:
                    del waiting[(*key, checkpoint_id)]
                return _Carried.NO_CHILD if waiting is self._late else _Carried.ALONE
        early.ended.wait()
        return _Carried.STORED if early.stored else _Carried.ALONE

    def _records(
        self,
        values: dict[str, Any],
        small: dict[str, Any],
        versions: ChannelVersions,
        on: _Last | None,
    ) -> tuple[builtins.list[chains.Record], dict[str, tuple[str, str, bytes]]]:
        """The records of a checkpoint's values (those not in its JSON), on the
        values of ``on`` (the checkpoint last put by this saver on the thread's
        namespace, its parent) or, without it, a snapshot; and the values as
        serialized, ``{channel: (version, type, bytes)}``."""
        records: builtins.list[chains.Record] = []
        held: dict[str, tuple[str, str, bytes]] = {}
        for channel, value in values.items():
            if channel in small:
                continue
            version = str(versions.get(channel))
            before = None if on is None else on.values.get(channel)
            if before is not None and before[0] == version:
                records.append(chains.same(channel))
                held[channel] = before
                continue
            kind, raw = self.serde.dumps_typed(value)
            held[channel] = (version, kind, raw)
            record = None
            if before is not None and before[1] == kind:
                record = chains.delta(channel, kind, before[2], raw)
            records.append(record or chains.full(channel, kind, raw))
        return records, held

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._put_writes(config, writes, task_id, task_path, carried=True)

    def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
        carried: bool,
    ) -> None:
        """``put_writes``; ``carried``: the writes may wait for their checkpoint's
        put to store them (``_carried``), which the async methods, every call of
        which runs on one thread, one after another, must not."""
        configurable = config["configurable"]
        # A special channel written twice in one call (LangGraph writes ``__resume__``
        # once per answered interrupt of a node) keeps its last write, as LangGraph's
        # own savers do; one statement cannot write one row twice on PostgreSQL.
        by_idx: dict[int, Write] = {}
        for idx, (channel, value) in enumerate(writes):
            key = WRITES_IDX_MAP.get(channel, idx)
            by_idx[key] = (key, channel, *self._dumps(value))
        thread_id = configurable["thread_id"]
        checkpoint_ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = configurable["checkpoint_id"]
        stored = list(by_idx.values())
        namespace = (thread_id, checkpoint_ns)
        outcome = (
            self._carried(namespace, checkpoint_id, (task_id, task_path, stored))
            if carried
            else _Carried.ALONE
        )
        if outcome is _Carried.STORED:
            return
        with self.borrowed.connection():
            self.backend.put_checkpoint_writes(
                thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, stored
            )
        if outcome is _Carried.NO_CHILD:
            # stored now: a child's put that begins right after was waiting for them
            with self._lock:
                now = time.monotonic()
                for gone in [k for k, at in self._late_alone.items() if now - at > JUST_PUT]:
                    del self._late_alone[gone]
                self._late_alone[(*namespace, checkpoint_id)] = now

    def _forget(self) -> None:
        """Write the next puts as snapshots (a base may be gone; a put finds it out
        anyway, then writes one)."""
        with self._lock:
            self._last.clear()

    def delete_thread(self, thread_id: str) -> None:
        self._forget()
        with self.borrowed.connection():
            self.backend.delete_threads([thread_id])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._forget()
        with self.borrowed.connection():
            self.backend.delete_checkpoint_runs([str(run_id) for run_id in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        with self.borrowed.connection():
            self.backend.copy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, not {strategy!r}.")
        self._forget()
        with self.borrowed.connection():
            self.backend.prune_threads(list(thread_ids), strategy == "keep_latest")

    def get_next_version(self, current: str | None, channel: None) -> str:
        """``"<32-digit counter>.<random>"``, what LangGraph's own savers use."""
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # The async methods: each its sync twin in Django's thread for the database.

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await sync_to_async(self.get_tuple)(config)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await sync_to_async(
            lambda: self.get_delta_channel_history(config=config, channels=channels)
        )()

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await sync_to_async(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )()
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await sync_to_async(self.put)(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await sync_to_async(self._put_writes)(config, writes, task_id, task_path, False)

    async def adelete_thread(self, thread_id: str) -> None:
        await sync_to_async(self.delete_thread)(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await sync_to_async(self.delete_for_runs)(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await sync_to_async(self.copy_thread)(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await sync_to_async(self.prune)(thread_ids, strategy=strategy)
