"""LangGraph checkpoints on the ORM: each operation one transaction, a thread's puts
queued on its row (locked by each, or made by the first)."""

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.db.models import Max, Q
from django.db.models.functions import Now

from agentstate.exceptions import HistoryForked
from agentstate.models import Checkpoint, CheckpointBlob, CheckpointWrite, Thread
from agentstate.types import THREAD_TOUCH, Put, StoredCheckpoint, Write, WriteCall

from .. import chains
from .operations import Operations

# The metadata key of a checkpoint whose graph has a ``DeltaChannel``: its channels.
DELTA_COUNTERS = "counters_since_delta_snapshot"

# Rows copied per statement by ``copy_thread``.
CHUNK = 500


def step_of(metadata: dict[str, Any]) -> int | None:
    """The metadata's ``step`` when it is an integer a column holds."""
    step = metadata.get("step")
    if isinstance(step, int) and not isinstance(step, bool) and -(2**31) <= step < 2**31:
        return step
    return None


def run_of(metadata: dict[str, Any]) -> str | None:
    run_id = metadata.get("run_id")
    return None if run_id is None else str(run_id)


class CheckpointOperations(Operations):
    def _touch_thread(self, thread_id: str) -> int:
        """The thread's row id, the row made or locked; its ``updated_at`` set to now
        when older than ``THREAD_TOUCH`` (indexed, so each change of it costs an index
        entry)."""
        threads = self.rows(Thread)
        pk: int | None = (
            self.lock_no_key(threads)
            .filter(thread_id=thread_id)
            .values_list("pk", flat=True)
            .first()
        )
        if pk is not None:
            threads.filter(pk=pk, updated_at__lt=Now() - THREAD_TOUCH).update(updated_at=Now())
            return pk
        self.upsert(Thread, [Thread(thread_id=thread_id)], ["thread_id"], ["updated_at"])
        made: int = (
            threads.select_for_update().values_list("pk", flat=True).get(thread_id=thread_id)
        )
        return made

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
        return self.atomic(
            self._put_checkpoint,
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            parent_id,
            checkpoint,
            metadata,
            values,
            base_id,
            refuse_fork,
            writes,
            parent_writes,
        )

    def _put_checkpoint(
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
        carried: bytes | None,
        parent_writes: list[WriteCall] | None,
    ) -> Put:
        thread = self._touch_thread(thread_id)
        sibling = (
            self.rows(Checkpoint)
            .filter(thread_id=thread, checkpoint_ns=checkpoint_ns, parent_checkpoint_id=parent_id)
            .exclude(checkpoint_id=checkpoint_id)
            .values_list("checkpoint_id", flat=True)
            .first()
        )
        if sibling is not None and refuse_fork:
            raise HistoryForked.of(
                thread_id=thread_id, checkpoint_ns=checkpoint_ns, parent=parent_id, head=sibling
            )
        if (
            base_id is not None
            and not self.rows(Checkpoint)
            .filter(thread_id=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=base_id)
            .exists()
        ):
            return Put(forked=sibling is not None, rebase=True)
        if parent_id is not None:
            for task_id, task_path, call in parent_writes or []:
                self._put_checkpoint_writes(
                    thread_id, checkpoint_ns, parent_id, task_id, task_path, call
                )
        # the writes of its tasks stored as rows (LangGraph may put them before it; or,
        # put again, what its row held no more of) join it, before any it holds: rows
        # are older than a row's writes
        early = self.rows(CheckpointWrite).filter(
            thread_id=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id
        )
        moved = chains.joined_writes(
            (task, path, idx, channel, kind, bytes(value or b""))
            for task, path, idx, channel, kind, value in early.order_by("pk").values_list(
                "task_id", "task_path", "idx", "channel", "type", "blob"
            )
        )
        if moved:
            early.delete()
        writes = b""
        if moved or carried:
            stored = (
                self.rows(Checkpoint)
                .filter(thread_id=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id)
                .values_list("writes", flat=True)
                .first()
            )
            writes = moved + bytes(stored or b"") + (carried or b"")
        self.upsert(
            Checkpoint,
            [
                Checkpoint(
                    thread_id=thread,
                    checkpoint_ns=checkpoint_ns,
                    checkpoint_id=checkpoint_id,
                    parent_checkpoint_id=parent_id,
                    checkpoint=checkpoint,
                    metadata=metadata,
                    run_id=run_of(metadata),
                    step=step_of(metadata),
                    forked=sibling is not None,
                    values=values,
                    base_checkpoint_id=base_id,
                    writes=writes or None,
                )
            ],
            ["thread", "checkpoint_ns", "checkpoint_id"],
            [
                "parent_checkpoint_id",
                "checkpoint",
                "metadata",
                "run_id",
                "step",
                "values",
                "base_checkpoint_id",
                *(["writes"] if writes else []),
            ],
        )
        return Put(forked=sibling is not None)

    def put_checkpoint_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        writes: list[Write],
    ) -> None:
        self.atomic(
            self._put_checkpoint_writes,
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            task_id,
            task_path,
            writes,
        )

    def _put_checkpoint_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        writes: list[Write],
    ) -> None:
        thread = self._touch_thread(thread_id)
        appended = chains.encode_writes(task_id, task_path, writes)
        row = (
            self.lock_no_key(self.rows(Checkpoint))
            .filter(thread_id=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id)
            .values_list("pk", "writes")
            .first()
        )
        if row is not None:
            stored = bytes(row[1] or b"")
            # a call appended already (a task's retry) is not appended again, unless it
            # writes a special channel, whose last write counts
            if appended in stored and not chains.special(writes):
                return
            if len(stored) + len(appended) <= chains.HELD_WRITES:
                self.rows(Checkpoint).filter(pk=row[0]).update(writes=stored + appended)
                return
            # past what a row holds: its writes, then this call's, as rows of their own
            self.rows(Checkpoint).filter(pk=row[0]).update(writes=None)
            appended = stored + appended
        # the first write at each (task, idx), the last for a special channel's (negative
        # idx), as a read keeps them
        kept: dict[tuple[str, int], CheckpointWrite] = {}
        for task, path, idx, channel, kind, value in chains.split_writes(appended):
            if idx < 0 or (task, idx) not in kept:
                kept[task, idx] = CheckpointWrite(
                    thread_id=thread,
                    checkpoint_ns=checkpoint_ns,
                    checkpoint_id=checkpoint_id,
                    task_id=task,
                    task_path=path,
                    idx=idx,
                    channel=channel,
                    type=kind,
                    blob=value,
                )
        # A special channel's write replaces the stored one; any other is kept as first
        # written, so a task's retry changes nothing.
        self.upsert(
            CheckpointWrite,
            [w for w in kept.values() if w.idx < 0],
            ["thread", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
            ["channel", "type", "blob", "task_path"],
        )
        self.rows(CheckpointWrite).bulk_create(
            [w for w in kept.values() if w.idx >= 0], ignore_conflicts=True
        )

    def checkpoint(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> StoredCheckpoint | None:
        found = self.checkpoints(thread_id, checkpoint_ns, checkpoint_id, None, None, 1)
        return found[0] if found else None

    def checkpoint_history(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str | None,
        channels: list[str],
    ) -> list[StoredCheckpoint]:
        target = self.checkpoint(thread_id, checkpoint_ns, checkpoint_id)
        parent = None if target is None else target.parent_checkpoint_id
        wanted, chain = set(channels), []
        while parent is not None and wanted:
            stored = self.checkpoint(thread_id, checkpoint_ns, parent)
            if stored is None:
                break
            chain.append(stored)
            wanted -= {blob[0] for blob in stored.blobs}
            wanted -= set(stored.checkpoint.get("channel_values", {}))
            parent = stored.parent_checkpoint_id
        return chain

    def checkpoints(
        self,
        thread_id: str | None,
        checkpoint_ns: str | None,
        checkpoint_id: str | None,
        metadata: dict[str, Any] | None,
        before: str | None,
        limit: int | None,
    ) -> list[StoredCheckpoint]:
        rows = self.rows(Checkpoint).select_related("thread")
        if thread_id is not None:
            rows = rows.filter(thread__thread_id=thread_id)
        if checkpoint_ns is not None:
            rows = rows.filter(checkpoint_ns=checkpoint_ns)
        if checkpoint_id is not None:
            rows = rows.filter(checkpoint_id=checkpoint_id)
        if before is not None:
            rows = rows.filter(checkpoint_id__lt=before)
        for key, value in (metadata or {}).items():
            rows = rows.filter(**{f"metadata__{key}": value})
        rows = rows.order_by("-checkpoint_id", "pk")
        found = list(rows if limit is None else rows[:limit])
        return self._loaded(found)

    def _loaded(self, found: list[Checkpoint]) -> list[StoredCheckpoint]:
        """The checkpoints with their values and writes, in three queries whatever
        their number."""
        if not found:
            return []
        threads = {c.thread_id for c in found}
        wanted = {
            (c.thread_id, c.checkpoint_ns, channel, str(version))
            for c in found
            for channel, version in c.checkpoint.get("channel_versions", {}).items()
        }
        values: dict[tuple[int, str, str, str], tuple[str, bytes]] = {}
        if wanted:
            blobs = (
                self.rows(CheckpointBlob)
                .filter(
                    thread_id__in=threads,
                    checkpoint_ns__in={key[1] for key in wanted},
                    channel__in={key[2] for key in wanted},
                    version__in={key[3] for key in wanted},
                )
                .exclude(type="empty")
                .values_list("thread_id", "checkpoint_ns", "channel", "version", "type", "blob")
            )
            for thread, ns, channel, version, kind, blob in blobs:
                if (thread, ns, channel, version) in wanted:
                    values[(thread, ns, channel, version)] = (kind, bytes(blob or b""))
        writes: dict[tuple[int, str, str], list[chains.PendingWrite]] = {}
        pending = self.rows(CheckpointWrite).filter(
            thread_id__in=threads, checkpoint_id__in={c.checkpoint_id for c in found}
        )
        for w in pending.values_list(
            "thread_id",
            "checkpoint_ns",
            "checkpoint_id",
            "task_id",
            "channel",
            "type",
            "blob",
            "task_path",
            "idx",
        ):
            writes.setdefault((w[0], w[1], w[2]), []).append(
                (w[3], w[4], w[5], bytes(w[6] or b""), w[7], w[8])
            )
        bases = self._bases(found)
        stored = []
        for c in found:
            versions = c.checkpoint.get("channel_versions", {})
            blobs_of: list[tuple[str, str, bytes]]
            if c.values is not None:
                chain, base = [bytes(c.values)], c.base_checkpoint_id
                while base is not None and len(chain) <= chains.CHAIN * 4:
                    key = (c.thread_id, c.checkpoint_ns, base)
                    if key not in bases:
                        break
                    held, base = bases[key]
                    chain.append(held)
                blobs_of = [
                    (channel, kind, blob) for channel, (kind, blob) in chains.resolve(chain).items()
                ]
            else:
                blobs_of = [
                    (channel, *values[found_key])
                    for channel, version in versions.items()
                    if (found_key := (c.thread_id, c.checkpoint_ns, channel, str(version)))
                    in values
                ]
            stored.append(
                StoredCheckpoint(
                    thread_id=c.thread.thread_id,
                    checkpoint_ns=c.checkpoint_ns,
                    checkpoint_id=c.checkpoint_id,
                    parent_checkpoint_id=c.parent_checkpoint_id,
                    checkpoint=c.checkpoint,
                    metadata=c.metadata,
                    blobs=blobs_of,
                    writes=chains.decode_writes(
                        None if c.writes is None else bytes(c.writes),
                        writes.get((c.thread_id, c.checkpoint_ns, c.checkpoint_id), []),
                    ),
                )
            )
        return stored

    def _bases(
        self, found: list[Checkpoint]
    ) -> dict[tuple[int, str, str], tuple[bytes, str | None]]:
        """The values of the checkpoints' bases, up to their snapshots: one query per
        step up the chains (at most ``chains.CHAIN``)."""
        bases: dict[tuple[int, str, str], tuple[bytes, str | None]] = {}
        wanted = {
            (c.thread_id, c.checkpoint_ns, c.base_checkpoint_id)
            for c in found
            if c.values is not None and c.base_checkpoint_id is not None
        }
        for _step in range(chains.CHAIN * 4):
            if not wanted:
                break
            # by namespace: a few terms, each with its ids (one term an id was built
            # in time growing with the square of their number, and made a parameter
            # each of thread, namespace and id)
            ids: dict[tuple[int, str], list[str]] = {}
            for thread, ns, checkpoint_id in wanted:
                ids.setdefault((thread, ns), []).append(checkpoint_id)
            match = Q(
                *(
                    Q(thread_id=thread, checkpoint_ns=ns, checkpoint_id__in=chain_ids)
                    for (thread, ns), chain_ids in ids.items()
                ),
                _connector=Q.OR,
            )
            for thread, ns, checkpoint_id, held, base in (
                self.rows(Checkpoint)
                .filter(match)
                .values_list(
                    "thread_id", "checkpoint_ns", "checkpoint_id", "values", "base_checkpoint_id"
                )
            ):
                bases[(thread, ns, checkpoint_id)] = (bytes(held or b""), base)
            wanted = {
                (thread, ns, base)
                for (thread, ns, _id), (_held, base) in bases.items()
                if base is not None and (thread, ns, base) not in bases
            }
        return bases

    def _materialize(self, kept: list[Checkpoint]) -> None:
        """Rewrite these checkpoints' values as snapshots (their bases are to be
        deleted)."""
        for stored, row in zip(self._loaded(kept), kept, strict=True):
            if row.values is None or row.base_checkpoint_id is None:
                continue
            values = chains.encode(chains.full(*blob) for blob in stored.blobs)
            self.rows(Checkpoint).filter(pk=row.pk).update(values=values, base_checkpoint_id=None)

    def delete_threads(self, thread_ids: list[str]) -> None:
        self.atomic(self._delete_threads, thread_ids)

    def _delete_threads(self, thread_ids: list[str]) -> None:
        pks = list(
            self.rows(Thread)
            .select_for_update()
            .filter(thread_id__in=thread_ids)
            .values_list("pk", flat=True)
        )
        self._delete_thread_rows(pks)

    def _delete_thread_rows(self, pks: list[int]) -> None:
        if not pks:
            return
        # Each a single DELETE: nothing refers to these rows.
        self.rows(CheckpointWrite).filter(thread_id__in=pks).delete()
        self.rows(CheckpointBlob).filter(thread_id__in=pks).delete()
        self.rows(Checkpoint).filter(thread_id__in=pks).delete()
        self.rows(Thread).filter(pk__in=pks)._raw_delete(self.alias)

    def delete_checkpoint_runs(self, run_ids: list[str]) -> None:
        if run_ids:
            self.atomic(self._delete_checkpoint_runs, run_ids)

    def _delete_checkpoint_runs(self, run_ids: list[str]) -> None:
        doomed = list(
            self.rows(Checkpoint)
            .filter(run_id__in=run_ids)
            .values_list("pk", "thread_id", "checkpoint_ns", "checkpoint_id")
        )
        self._delete_checkpoints(doomed)

    def _delete_checkpoints(self, doomed: Iterable[tuple[int, int, str, str]]) -> None:
        doomed = list(doomed)
        # a checkpoint kept whose values are on one deleted becomes a snapshot first
        gone = {(thread, ns, checkpoint_id) for _pk, thread, ns, checkpoint_id in doomed}
        pks = {pk for pk, *_rest in doomed}
        for thread in {key[0] for key in gone}:
            on_gone = [
                c
                for c in self.rows(Checkpoint)
                .select_related("thread")
                .filter(thread_id=thread, base_checkpoint_id__isnull=False)
                if c.pk not in pks and (thread, c.checkpoint_ns, c.base_checkpoint_id) in gone
            ]
            self._materialize(on_gone)
        for start in range(0, len(doomed), CHUNK):
            chunk = doomed[start : start + CHUNK]
            match = Q()
            for _pk, thread, ns, checkpoint_id in chunk:
                match |= Q(thread_id=thread, checkpoint_ns=ns, checkpoint_id=checkpoint_id)
            self.rows(CheckpointWrite).filter(match).delete()
            self.rows(Checkpoint).filter(pk__in=[row[0] for row in chunk]).delete()

    def copy_thread(self, source: str, target: str) -> None:
        self.atomic(self._copy_thread, source, target)

    def _copy_thread(self, source: str, target: str) -> None:
        origin = self.rows(Thread).filter(thread_id=source).values_list("pk", flat=True).first()
        if origin is None:
            return
        copy = self._touch_thread(target)
        model: type[Checkpoint] | type[CheckpointBlob] | type[CheckpointWrite]
        for model in (Checkpoint, CheckpointBlob, CheckpointWrite):
            fields = [
                f.attname
                for f in model._meta.concrete_fields
                if f.attname not in ("id", "thread_id", "created_at")
            ]
            batch: list[Any] = []
            rows = self.rows(model).filter(thread_id=origin).order_by("pk").values(*fields)
            for row in rows.iterator(chunk_size=CHUNK):
                batch.append(model(thread_id=copy, **row))
                if len(batch) == CHUNK:
                    self.rows(model).bulk_create(batch, ignore_conflicts=True)
                    batch = []
            self.rows(model).bulk_create(batch, ignore_conflicts=True)

    def prune_threads(self, thread_ids: list[str], keep_latest: bool) -> None:
        if thread_ids:
            self.atomic(self._prune_threads, thread_ids, keep_latest)

    def _prune_threads(self, thread_ids: list[str], keep_latest: bool) -> None:
        names = dict(
            self.rows(Thread)
            .select_for_update()
            .filter(thread_id__in=thread_ids)
            .values_list("pk", "thread_id")
        )
        pks = list(names)
        if not keep_latest:
            self._delete_thread_rows(pks)
            return
        for thread in pks:
            checkpoints = self.rows(Checkpoint).filter(thread_id=thread)
            latest = {
                (ns, newest)
                for ns, newest in checkpoints.values("checkpoint_ns")
                .annotate(newest=Max("checkpoint_id"))
                .values_list("checkpoint_ns", "newest")
            }
            latest |= self._delta_ancestors(names[thread], latest)
            kept = [
                c
                for c in checkpoints.values_list("checkpoint_ns", "checkpoint_id", "checkpoint")
                if (c[0], c[1]) in latest
            ]
            self._delete_checkpoints(
                row
                for row in checkpoints.values_list(
                    "pk", "thread_id", "checkpoint_ns", "checkpoint_id"
                )
                if (row[2], row[3]) not in latest
            )
            used = {
                (ns, channel, str(version))
                for ns, _id, body in kept
                for channel, version in body.get("channel_versions", {}).items()
            }
            unused = [
                pk
                for pk, ns, channel, version in self.rows(CheckpointBlob)
                .filter(thread_id=thread)
                .values_list("pk", "checkpoint_ns", "channel", "version")
                if (ns, channel, version) not in used
            ]
            for start in range(0, len(unused), CHUNK):
                self.rows(CheckpointBlob).filter(pk__in=unused[start : start + CHUNK]).delete()

    def _delta_ancestors(
        self, thread_id: str, latest: set[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        """What a ``DeltaChannel`` of a namespace's latest checkpoint is rebuilt from
        (its metadata's ``counters_since_delta_snapshot`` names them): the ancestors
        back to the nearest one holding a value of each, ``(namespace, id)``."""
        kept: set[tuple[str, str]] = set()
        for ns, checkpoint_id in latest:
            metadata = (
                self.rows(Checkpoint)
                .filter(thread__thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id)
                .values_list("metadata", flat=True)
                .first()
            )
            channels = (metadata or {}).get(DELTA_COUNTERS)
            if isinstance(channels, dict) and channels:
                chain = self.checkpoint_history(thread_id, ns, checkpoint_id, list(channels))
                kept |= {(ns, stored.checkpoint_id) for stored in chain}
        return kept

    def purge_threads(self, size: int, ttl: timedelta) -> int:
        return self.atomic(self._purge_threads, size, ttl)

    def _purge_threads(self, size: int, ttl: timedelta) -> int:
        stale = list(
            self.rows(Thread)
            .filter(updated_at__lt=Now() - ttl - THREAD_TOUCH)
            .select_for_update(skip_locked=True)
            .order_by("updated_at")
            .values_list("pk", flat=True)[:size]
        )
        self._delete_thread_rows(stale)
        return len(stale)
