"""LangGraph checkpoints on PostgreSQL: ``sql/50_langgraph.sql``.

A put, a task's writes and a read (``checkpoint``) are one call each, the hot
path of a running graph; listing, deleting, copying and pruning are the ORM
backend's (``agentstate.backends.orm.checkpoints``), rare operations that
one function would not make faster in any way that counts.
"""

import dataclasses
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

from agentstate.backends import chains
from agentstate.backends.orm.checkpoints import CheckpointOperations as ORMCheckpointOperations
from agentstate.db import Array, Json
from agentstate.types import Put, StoredCheckpoint, Write, WriteCall


class CheckpointOperations(ORMCheckpointOperations):
    call: Callable[..., dict[str, Any]]
    call_row: Callable[..., tuple[Any, ...] | None]
    call_rows: Callable[..., list[tuple[Any, ...]]]

    def put_checkpoint(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        checkpoint: dict[str, Any],
        metadata: dict[str, Any],
        values: bytes,
        base_id: str | None,
        refuse_fork: bool,
        writes: bytes | None = None,
        parent_writes: list[WriteCall] | None = None,
    ) -> Put:
        # only when there are some: the driver adapts no empty arrays on every put
        parents = (
            {
                "p_parent_writes": Array(
                    [chains.encode_writes(*c) for c in parent_writes], "bytea"
                ),
                "p_parent_special": Array([chains.special(c[2]) for c in parent_writes], "boolean"),
            }
            if parent_writes
            else {}
        )
        result = self.call(
            "put_checkpoint",
            p_thread=thread_id,
            p_ns=checkpoint_ns,
            p_id=checkpoint_id,
            p_parent=parent_id,
            p_checkpoint=Json(checkpoint),
            p_metadata=Json(metadata),
            p_values=values,
            p_base=base_id,
            p_refuse=refuse_fork,
            p_writes=writes,
            **parents,
        )
        return Put(forked=bool(result["forked"]), rebase=bool(result.get("rebase")))

    def put_checkpoint_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        writes: list[Write],
    ) -> None:
        self.call(
            "put_checkpoint_writes",
            p_thread=thread_id,
            p_ns=checkpoint_ns,
            p_id=checkpoint_id,
            p_writes=chains.encode_writes(task_id, task_path, writes),
            p_special=chains.special(writes),
        )

    def checkpoint(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> StoredCheckpoint | None:
        row = self.call_row(
            "checkpoint", p_thread=thread_id, p_ns=checkpoint_ns, p_id=checkpoint_id
        )
        if row is None:
            return None
        found_id, parent, body, metadata, *rest = row
        return _stored(thread_id, checkpoint_ns, found_id, parent, body, metadata, rest)

    def checkpoint_history(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str | None,
        channels: list[str],
    ) -> list[StoredCheckpoint]:
        rows = self.call_rows(
            "checkpoint_history",
            p_thread=thread_id,
            p_ns=checkpoint_ns,
            p_id=checkpoint_id,
            p_channels=Array(channels, "text"),
        )
        wanted = set(channels)
        found = []
        for found_id, parent, body, *rest in rows:
            stored = _stored(thread_id, checkpoint_ns, found_id, parent, body, {}, rest)
            blobs = [blob for blob in stored.blobs if blob[0] in wanted]
            found.append(dataclasses.replace(stored, blobs=blobs))
        return found

    def purge_threads(self, size: int, ttl: timedelta) -> int:
        return cast(int, self.call("purge_threads", p_size=size, p_ttl=ttl)["count"])


def _stored(
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent: str | None,
    body: Any,
    metadata: Any,
    arrays: list[Any],
) -> StoredCheckpoint:
    """A checkpoint from a row of ``agentstate_checkpoint`` (or of its history): its
    values and writes as bytes (``chains``), or as parallel arrays (rows of earlier
    releases)."""
    values, chain, written, channels, types, blobs, *writes = arrays
    tasks, write_channels, write_types, write_blobs, paths, idx = (w or [] for w in writes)
    held = chains.resolve([bytes(values), *(bytes(v) for v in chain or [])]) if values else {}
    return StoredCheckpoint(
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id=parent,
        # Django has the driver answer jsonb as its text
        checkpoint=json.loads(body) if isinstance(body, str) else body,
        metadata=json.loads(metadata) if isinstance(metadata, str) else metadata,
        blobs=[(channel, kind, blob) for channel, (kind, blob) in held.items()]
        + [
            (channel, kind, bytes(blob))
            for channel, kind, blob in zip(channels or [], types or [], blobs or [], strict=True)
        ],
        writes=chains.decode_writes(
            bytes(written) if written is not None else None,
            [
                (task, channel, kind, bytes(blob), path, i)
                for task, channel, kind, blob, path, i in zip(
                    tasks, write_channels, write_types, write_blobs, paths, idx, strict=True
                )
            ],
        ),
    )
