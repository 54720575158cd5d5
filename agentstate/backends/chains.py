"""LangGraph checkpoints' values and pending writes as bytes in the checkpoint's row.

A checkpoint's ``values`` (every channel value it holds beyond the small ones of
its JSON) are records, each a channel's value:

- ``FULL``: the serialized value (compressed by ``squeezed`` when that pays);
- ``SAME``: the value its ``base`` checkpoint holds for the channel;
- ``DELTA``: the base's value extended: a list whose earlier version's elements
  are its first ones (a conversation's messages) is the base's serialized bytes
  less their first ``skip`` (msgpack's array header), after ``head`` (the new
  header) and before ``tail`` (the new elements).

A checkpoint without a base is a snapshot; the saver writes one every ``CHAIN``
checkpoints of a chain, so a read joins at most ``CHAIN`` rows. ``writes`` is the
checkpoint's pending writes appended one task's call after another, up to
``HELD_WRITES`` bytes: a call that would take it past them moves them, and
itself, to write rows of their own (``agentstate_checkpointwrite``), so that each
call copies at most that much, however many tasks write to one checkpoint. Rows
are always older than the bytes: those written before their checkpoint was put
are taken into its bytes by the put. A read keeps the first write at each
``(task, idx)``, the last for a negative ``idx``.

Both backends store these bytes the same way; only this module reads them.
"""

import itertools
import struct
import threading
from collections.abc import Iterable, Iterator, Sequence

from agentstate.types import Write

from .base import squeezed, unpacked

FULL, SAME, DELTA = 0, 1, 2

# The most checkpoints a chain of bases holds (a snapshot, then deltas on it).
CHAIN = 16

# The most bytes of pending writes a checkpoint's row holds (``agentstate_put_checkpoint_writes``
# in ``50_langgraph.sql`` says the same number): a step's few writes stay in the row, a
# fan-out's many go to rows of their own.
HELD_WRITES = 4 << 10

_LEN = struct.Struct(">I")
_INT = struct.Struct(">i")

# (op, channel, kind, payload, head, skip): kind and payload as ``squeezed`` made them
Record = tuple[int, str, str, bytes, bytes, int]
# (task_id, channel, type, bytes, task_path, idx)
PendingWrite = tuple[str, str, str, bytes, str, int]


def _field(out: bytearray, data: bytes) -> None:
    out += _LEN.pack(len(data))
    out += data


def _read(data: bytes, at: int) -> tuple[bytes, int]:
    (size,) = _LEN.unpack_from(data, at)
    at += _LEN.size
    return data[at : at + size], at + size


def full(channel: str, kind: str, value: bytes) -> Record:
    return (FULL, channel, *squeezed(kind, value), b"", 0)


def same(channel: str) -> Record:
    return (SAME, channel, "", b"", b"", 0)


def encode(records: Iterable[Record]) -> bytes:
    out = bytearray()
    for op, channel, kind, payload, head, skip in records:
        out.append(op)
        _field(out, channel.encode())
        if op != SAME:
            _field(out, kind.encode())
            _field(out, payload)
        if op == DELTA:
            _field(out, head)
            out += _LEN.pack(skip)
    return bytes(out)


def decode(data: bytes) -> list[Record]:
    records: list[Record] = []
    at = 0
    while at < len(data):
        op = data[at]
        channel, at = _read(data, at + 1)
        kind, payload, head, skip = b"", b"", b"", 0
        if op != SAME:
            kind, at = _read(data, at)
            payload, at = _read(data, at)
        if op == DELTA:
            head, at = _read(data, at)
            (skip,) = _LEN.unpack_from(data, at)
            at += _LEN.size
        records.append((op, channel.decode(), kind.decode(), payload, head, skip))
    return records


def _array_header(value: bytes) -> int | None:
    """The length of the msgpack array header ``value`` starts with, if it does."""
    if not value:
        return None
    first = value[0]
    if 0x90 <= first <= 0x9F:
        return 1
    return {0xDC: 3, 0xDD: 5}.get(first)


def delta(channel: str, kind: str, before: bytes, value: bytes) -> Record | None:
    """``value`` as a ``DELTA`` on ``before`` (both msgpack), when it is ``before``'s
    list with elements appended; else ``None``."""
    if kind != "msgpack":
        return None
    old, new = _array_header(before), _array_header(value)
    if old is None or new is None:
        return None
    body = len(before) - old
    if len(value) - new < body or value[new : new + body] != before[old:]:
        return None
    return (DELTA, channel, *squeezed(kind, value[new + body :]), value[:new], old)


def resolve(chain: Sequence[bytes | None]) -> dict[str, tuple[str, bytes]]:
    """A checkpoint's values, ``{channel: (serde type, bytes)}``, from its own
    ``values`` then its bases' (nearest first, ending at a snapshot).

    Each step up a chain is resolved once per process (``_Resolved``): a thread's
    next read finds its bases' values resolved, and decodes only what its newer
    checkpoints hold."""
    token, held = 0, _EMPTY
    for data in reversed(chain):
        key = (token, data or b"")
        found = _resolved.get(key)
        if found is None:
            found = _resolved.add(key, _applied(held, key[1]))
        token, held = found
    return dict(held)


_EMPTY: dict[str, tuple[str, bytes]] = {}


def _applied(held: dict[str, tuple[str, bytes]], data: bytes) -> dict[str, tuple[str, bytes]]:
    """The values of a checkpoint whose ``values`` are ``data`` and whose base holds
    ``held``."""
    now: dict[str, tuple[str, bytes]] = {}
    for op, channel, kind, payload, head, skip in decode(data):
        if op == FULL:
            now[channel] = unpacked(kind, payload)
        elif channel in held:  # a chain cut short (never written so) holds nothing
            base_kind, base = held[channel]
            if op == SAME:
                now[channel] = (base_kind, base)
            else:
                tail = unpacked(kind, payload)[1]
                now[channel] = (base_kind, b"".join((head, memoryview(base)[skip:], tail)))
    return now


class _Resolved:
    """The values of chains resolved in this process, each step up a chain keyed by
    ``(token, values)``: the token of its base's entry (``0`` for a snapshot) and
    its own ``values`` bytes, so that an entry is found only by the same bytes on
    the same resolved base. Tokens are never reused; the oldest entries go first
    once the values held pass ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.entries: dict[tuple[int, bytes], tuple[int, dict[str, tuple[str, bytes]]]] = {}
        self.size = 0
        self.tokens = itertools.count(1)
        self.lock = threading.Lock()

    def get(self, key: tuple[int, bytes]) -> tuple[int, dict[str, tuple[str, bytes]]] | None:
        return self.entries.get(key)

    def add(
        self, key: tuple[int, bytes], held: dict[str, tuple[str, bytes]]
    ) -> tuple[int, dict[str, tuple[str, bytes]]]:
        size = _size(key, held)
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                return found
            entry = (next(self.tokens), held)
            if size > self.limit:
                return entry
            self.entries[key] = entry
            self.size += size
            while self.size > self.limit:
                oldest = next(iter(self.entries))
                self.size -= _size(oldest, self.entries.pop(oldest)[1])
            return entry


def _size(key: tuple[int, bytes], held: dict[str, tuple[str, bytes]]) -> int:
    """The bytes an entry of ``_Resolved`` holds: its step's values and what they resolve to."""
    return len(key[1]) + sum(len(value) for _kind, value in held.values())


# The bytes of resolved values a process keeps (``_Resolved``).
RESOLVED_BYTES = 16 << 20

_resolved = _Resolved(RESOLVED_BYTES)


def special(writes: Sequence[Write]) -> bool:
    """Whether a call's pending writes write a special channel (a negative idx:
    ``__error__``, ``__interrupt__`` and the others), whose last write is kept."""
    return any(w[0] < 0 for w in writes)


def encode_writes(task_id: str, task_path: str, writes: Sequence[Write]) -> bytes:
    """A task's pending writes, to append to the checkpoint's ``writes`` (each value
    compressed by ``squeezed`` when that pays)."""
    return joined_writes(
        (task_id, task_path, idx, channel, *squeezed(written, raw))
        for idx, channel, written, raw in writes
    )


def joined_writes(writes: Iterable[tuple[str, str, int, str, str, bytes]]) -> bytes:
    """Writes as stored, ``(task_id, task_path, idx, channel, type, bytes)``, in
    ``encode_writes``' form: ``split_writes`` undone."""
    out = bytearray()
    for task_id, task_path, idx, channel, kind, value in writes:
        _field(out, task_id.encode())
        _field(out, task_path.encode())
        out += _INT.pack(idx)
        _field(out, channel.encode())
        _field(out, kind.encode())
        _field(out, value)
    return bytes(out)


def split_writes(data: bytes | None) -> Iterator[tuple[str, str, int, str, str, bytes]]:
    """``encode_writes``' bytes as they are stored, one write at a time: ``(task_id,
    task_path, idx, channel, type, bytes)``, the value compressed or not."""
    at, data = 0, data or b""
    while at < len(data):
        task, at = _read(data, at)
        path, at = _read(data, at)
        (idx,) = _INT.unpack_from(data, at)
        channel, at = _read(data, at + _INT.size)
        kind, at = _read(data, at)
        value, at = _read(data, at)
        yield task.decode(), path.decode(), idx, channel.decode(), kind.decode(), value


def decode_writes(data: bytes | None, rows: Iterable[PendingWrite] = ()) -> list[PendingWrite]:
    """A checkpoint's pending writes, ``(task_id, channel, type, bytes, task_path,
    idx)``: its write rows (older than its bytes, so first; their values as stored,
    compressed or not), then ``data``'s; the first at each ``(task, idx)``, the last
    for a negative ``idx``."""
    found: dict[tuple[str, int], PendingWrite] = {}

    def keep(write: PendingWrite) -> None:
        key = (write[0], write[5])
        if write[5] < 0 or key not in found:
            found[key] = write

    for row in rows:
        keep((row[0], row[1], *unpacked(row[2], row[3]), row[4], row[5]))
    for task, path, idx, channel, kind, value in split_writes(data):
        keep((task, channel, *unpacked(kind, value), path, idx))
    return list(found.values())
