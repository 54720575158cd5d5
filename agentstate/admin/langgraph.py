"""LangGraph threads and their checkpoints (``agentstate.contrib.langgraph``), read-only.

A thread's page lists its checkpoints (namespace, step, time, metadata,
whether it forked); a checkpoint's page shows its metadata, its channel
values and its pending writes decoded by LangGraph's serializer (the saver's
default, ``JsonPlusSerializer``), and the pending interrupts. Where LangGraph
is not installed the values are shown by their type and size. A thread can be
deleted, with everything it holds.
"""

from typing import Any

from django.contrib import admin
from django.db.models import Count, Max, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from agentstate.admin.context import pretty_json
from agentstate.backends import backend
from agentstate.backends.base import unpacked
from agentstate.models import Checkpoint, Thread
from agentstate.types import StoredCheckpoint

INTERRUPT = "__interrupt__"


def decoded(kind: str, blob: bytes | memoryview | None) -> Any:
    """A stored value as LangGraph's serializer reads it, else a description."""
    if blob is None or kind == "empty":
        return None
    try:
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    except ImportError:
        return f"<{kind}, {len(bytes(blob))} bytes>"
    try:
        return JsonPlusSerializer().loads_typed(unpacked(kind, bytes(blob)))
    except Exception as error:  # a value this process cannot decode
        return f"<{kind}, {len(bytes(blob))} bytes: {error}>"


def shown(value: Any) -> str:
    """``value`` as indented JSON, or its ``repr`` when JSON cannot hold it."""
    try:
        return pretty_json(value)
    except (TypeError, ValueError):
        return format_html('<pre style="margin:0; white-space:pre-wrap">{}</pre>', repr(value))


class ReadOnly:
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class CheckpointInline(ReadOnly, admin.TabularInline):
    model = Checkpoint
    extra = 0
    can_delete = False
    show_change_link = True
    fields = readonly_fields = ("checkpoint_id", "checkpoint_ns", "step", "created_at", "forked")
    ordering = ("-checkpoint_id",)


@admin.register(Thread)
class ThreadAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ("thread_id", "checkpoint_count", "latest_step", "updated_at", "created_at")
    search_fields = ("thread_id",)
    ordering = ("-updated_at", "-pk")
    fields = readonly_fields = ("thread_id", "created_at", "updated_at")
    inlines = (CheckpointInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        threads: QuerySet[Thread] = super().get_queryset(request)
        return threads.annotate(
            checkpoint_count=Count("checkpoints", distinct=True),
            latest_step=Max("checkpoints__step"),
        )

    @admin.display(description=_("checkpoints"), ordering="checkpoint_count")
    def checkpoint_count(self, thread: Thread) -> int:
        count: int = thread.checkpoint_count  # type: ignore[attr-defined]  # annotated
        return count

    @admin.display(description=_("latest step"), ordering="latest_step")
    def latest_step(self, thread: Thread) -> int | None:
        step: int | None = thread.latest_step  # type: ignore[attr-defined]  # annotated
        return step


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ("checkpoint_id", "thread", "checkpoint_ns", "step", "created_at", "forked")
    list_filter = ("forked",)
    search_fields = ("thread__thread_id", "checkpoint_id", "run_id")
    list_select_related = ("thread",)
    ordering = ("-checkpoint_id",)
    fields = readonly_fields = (
        "thread",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_checkpoint_id",
        "step",
        "created_at",
        "forked",
        "pretty_metadata",
        "values",
        "pending_interrupts",
        "pending_writes",
    )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a thread is deleted whole

    @admin.display(description=_("metadata"))
    def pretty_metadata(self, checkpoint: Checkpoint) -> str:
        return shown(checkpoint.metadata)

    def _stored(self, checkpoint: Checkpoint) -> StoredCheckpoint | None:
        """The checkpoint as the saver reads it (its values and writes in its row,
        on its bases, or in rows of their own)."""
        return backend(checkpoint._state.db).checkpoint(
            checkpoint.thread.thread_id, checkpoint.checkpoint_ns, checkpoint.checkpoint_id
        )

    @admin.display(description=_("channel values"))
    def values(self, checkpoint: Checkpoint) -> str:
        stored = self._stored(checkpoint)
        # a small value is in the checkpoint's own JSON
        values = dict(checkpoint.checkpoint.get("channel_values", {}))
        for channel, kind, blob in [] if stored is None else stored.blobs:
            values.setdefault(channel, decoded(kind, blob))
        return shown(dict(sorted(values.items())))

    def _writes(self, checkpoint: Checkpoint) -> list[tuple[str, str, str, bytes, str, int]]:
        stored = self._stored(checkpoint)
        return [] if stored is None else stored.writes

    @admin.display(description=_("pending interrupts"))
    def pending_interrupts(self, checkpoint: Checkpoint) -> str:
        found = [
            decoded(kind, blob)
            for _task, channel, kind, blob, _path, _idx in self._writes(checkpoint)
            if channel == INTERRUPT
        ]
        return shown(found) if found else "—"

    @admin.display(description=_("pending writes"))
    def pending_writes(self, checkpoint: Checkpoint) -> str:
        rows = [
            (task, channel, shown(decoded(kind, blob)))
            for task, channel, kind, blob, _path, _idx in self._writes(checkpoint)
            if channel != INTERRUPT
        ]
        if not rows:
            return "—"
        return format_html(
            "<table>{}</table>",
            format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", rows),
        )
