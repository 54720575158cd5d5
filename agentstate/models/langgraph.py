"""LangGraph threads: checkpoints, their channel values and pending writes."""

from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from agentstate.fields import (
    AnyDepthJSONField,
    ExactCharField,
    ExactTextField,
    TextPrefixIndex,
    TextUniqueConstraint,
)

from .base import KEY_LENGTH, where_set


class Thread(models.Model):
    """A LangGraph thread (``agentstate.contrib.langgraph.AgentStateSaver``): its
    checkpoints, their channel values and pending writes hang off it, and
    ``updated_at`` (every put) is what ``AGENTSTATE["THREAD_TTL"]`` measures."""

    thread_id = ExactCharField(_("thread id"), max_length=KEY_LENGTH)
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    updated_at = models.DateTimeField(_("updated at"), db_default=Now())

    class Meta:
        verbose_name = _("LangGraph thread")
        verbose_name_plural = _("LangGraph threads")
        ordering = ["-updated_at", "-pk"]
        # a constraint, not unique=True: on PostgreSQL that adds a LIKE index nothing uses
        constraints = [models.UniqueConstraint(fields=["thread_id"], name="agentstate_thread_id")]
        indexes = [models.Index(fields=["updated_at"], name="agentstate_thread_updated")]

    def __str__(self) -> str:
        return self.thread_id


class Checkpoint(models.Model):
    """One LangGraph checkpoint of a thread's namespace, without its channel values
    (``CheckpointBlob``): ``checkpoint`` is the rest of it as JSON, ``metadata``
    its metadata. ``forked``: its parent already had a child when it was put
    (or it is a second root), so the thread's history branched here."""

    thread = models.ForeignKey(
        Thread,
        on_delete=models.CASCADE,
        related_name="checkpoints",
        verbose_name=_("thread"),
        # no constraint in the database: the saver makes or finds the thread's row in
        # the statement that writes these, and deletes them with it; a checked key
        # would lock the thread's row once per row written (a MultiXact when a put and
        # a task's writes hold it at once)
        db_constraint=False,
        db_index=False,
    )
    checkpoint_ns = ExactTextField(_("namespace"), blank=True)
    checkpoint_id = ExactCharField(_("checkpoint id"), max_length=64)
    parent_checkpoint_id = ExactCharField(
        _("parent checkpoint id"), max_length=64, null=True, blank=True
    )
    checkpoint = AnyDepthJSONField(_("checkpoint"))
    metadata = AnyDepthJSONField(_("metadata"), default=dict, blank=True)
    run_id = ExactCharField(_("run id"), max_length=KEY_LENGTH, null=True, blank=True)
    step = models.IntegerField(_("step"), null=True, blank=True)
    forked = models.BooleanField(_("forked"), default=False)
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    # Its channel values and pending writes (``agentstate.backends.chains``): the
    # values as records on those of ``base_checkpoint_id`` (none: a snapshot); rows
    # of earlier releases have none here, their values and writes are rows of
    # ``CheckpointBlob`` and ``CheckpointWrite``.
    values = models.BinaryField(_("values"), null=True, blank=True)
    base_checkpoint_id = ExactCharField(
        _("base checkpoint id"), max_length=64, null=True, blank=True
    )
    writes = models.BinaryField(_("pending writes"), null=True, blank=True)

    class Meta:
        verbose_name = _("LangGraph checkpoint")
        verbose_name_plural = _("LangGraph checkpoints")
        ordering = ["-checkpoint_id"]
        constraints = [
            TextUniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id"],
                name="agentstate_checkpoint_id",
            ),
        ]
        indexes = [
            # what a put looks up: the children of its parent (a fork when there is one).
            # Over the checkpoints that have a parent only, so that it cannot serve a
            # lookup by checkpoint id: with its thread and namespace first, a generic
            # plan (which PL/pgSQL keeps) would find it as cheap as the unique key's
            # and scan the whole thread (MySQL and MariaDB index every row)
            TextPrefixIndex(
                fields=["thread", "checkpoint_ns", "parent_checkpoint_id"],
                condition=models.Q(parent_checkpoint_id__isnull=False),
                name="agentstate_checkpoint_parent",
            ),
            where_set("run_id", "agentstate_checkpoint_run"),
        ]

    def __str__(self) -> str:
        return self.checkpoint_id


class CheckpointBlob(models.Model):
    """A channel's value at one version, serialized by the saver's serde
    (``type`` "empty": the channel was emptied, no value)."""

    thread = models.ForeignKey(
        Thread,
        on_delete=models.CASCADE,
        related_name="blobs",
        verbose_name=_("thread"),
        # no constraint in the database: the saver makes or finds the thread's row in
        # the statement that writes these, and deletes them with it; a checked key
        # would lock the thread's row once per row written (a MultiXact when a put and
        # a task's writes hold it at once)
        db_constraint=False,
        db_index=False,
    )
    checkpoint_ns = ExactTextField(_("namespace"), blank=True)
    channel = ExactCharField(_("channel"), max_length=KEY_LENGTH)
    version = ExactCharField(_("version"), max_length=KEY_LENGTH)
    type = models.CharField(_("type"), max_length=32)
    blob = models.BinaryField(_("value"), null=True, blank=True)

    class Meta:
        verbose_name = _("LangGraph channel value")
        verbose_name_plural = _("LangGraph channel values")
        ordering = ["channel", "version"]
        constraints = [
            TextUniqueConstraint(
                fields=["thread", "checkpoint_ns", "channel", "version"],
                name="agentstate_blob_version",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel}@{self.version}"


class CheckpointWrite(models.Model):
    """A pending write of a task against a checkpoint, serialized by the saver's serde."""

    thread = models.ForeignKey(
        Thread,
        on_delete=models.CASCADE,
        related_name="writes",
        verbose_name=_("thread"),
        # no constraint in the database: the saver makes or finds the thread's row in
        # the statement that writes these, and deletes them with it; a checked key
        # would lock the thread's row once per row written (a MultiXact when a put and
        # a task's writes hold it at once)
        db_constraint=False,
        db_index=False,
    )
    checkpoint_ns = ExactTextField(_("namespace"), blank=True)
    checkpoint_id = ExactCharField(_("checkpoint id"), max_length=64)
    task_id = ExactCharField(_("task id"), max_length=KEY_LENGTH)
    task_path = models.TextField(_("task path"), blank=True)
    idx = models.IntegerField(_("index"))
    channel = ExactCharField(_("channel"), max_length=KEY_LENGTH)
    type = models.CharField(_("type"), max_length=32)
    blob = models.BinaryField(_("value"), null=True, blank=True)

    class Meta:
        verbose_name = _("LangGraph pending write")
        verbose_name_plural = _("LangGraph pending writes")
        ordering = ["task_path", "task_id", "idx"]
        constraints = [
            TextUniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
                name="agentstate_write_task_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}[{self.idx}] {self.channel}"
