"""Celery tasks of agentstate: thin wrappers around the services.

Schedule ``agentstate.tasks.expire_pauses``, ``agentstate.tasks.send_webhooks`` and
``agentstate.tasks.resume_ready`` with Celery beat (the demo site runs them every minute); sites using cron run
``manage.py agentstate_expire``, which needs no Celery. ``agentstate.tasks.resume_run``
is not scheduled: a decision that leaves the run of a registered bridge
(``agentstate.contrib.register``) ready to go on queues it. This module needs the
``celery`` extra. See docs/deployment.md.

The core knows nothing of Celery: it sends signals, and ``connect`` (called by
``AgentStateConfig.ready`` when Celery is installed) wires this module's receivers
to them: ``deliveries_written`` hands a committed change's webhook deliveries to
the broker, ``approval_decided`` queues ``resume_run`` for a run that waits on a
registered bridge.
"""

import atexit
import contextlib
import logging
import math
import os
import queue
import threading
import time
from typing import Any

from agentstate.extras import missing

try:
    from celery import Celery, current_app, shared_task
except ImportError as error:
    raise missing("celery", "agentstate.tasks", error) from error

from django.db import InterfaceError, OperationalError  # noqa: E402

from agentstate import contrib, signals  # noqa: E402
from agentstate.conf import agentstate_settings  # noqa: E402
from agentstate.contrib import resumes  # noqa: E402
from agentstate.contrib.kept import waiting_on  # noqa: E402
from agentstate.contrib.service_store import ServiceStore  # noqa: E402
from agentstate.models import ApprovalRequest  # noqa: E402
from agentstate.services import webhooks  # noqa: E402
from agentstate.services.approvals import in_status  # noqa: E402
from agentstate.services.sweep import sweep  # noqa: E402

logger = logging.getLogger(__name__)

# A task carrying work (a delivery, a resume) that meets the database unreachable
# is retried, with backoff (about 1, 2, 4 ... up to 60 s, jittered), for about ten
# minutes; after that its work still waits in the database for the beat tasks.
RETRY_WHEN_DATABASE_DOWN = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": True,
    "retry_backoff_max": 60,
    "max_retries": 12,
}


@shared_task(name="agentstate.tasks.expire_pauses", ignore_result=True)
def expire_pauses() -> dict[str, int]:
    """Expire overdue pauses and approval requests, purge old pauses: the counts."""
    return sweep().as_dict()


@shared_task(
    name="agentstate.tasks.deliver_webhook",
    ignore_result=True,
    acks_late=True,
    reject_on_worker_lost=True,
    **RETRY_WHEN_DATABASE_DOWN,
)
def deliver_webhook(delivery_id: int) -> None:
    """Send one webhook delivery; a failure schedules the next try."""
    _deliver(delivery_id)


@shared_task(
    name="agentstate.tasks.deliver_webhooks",
    ignore_result=True,
    acks_late=True,
    reject_on_worker_lost=True,
    **RETRY_WHEN_DATABASE_DOWN,
)
def deliver_webhooks(delivery_ids: list[int]) -> None:
    """The deliveries a process handed over together (``_Handoff``): one is sent here,
    several are queued each as its own ``deliver_webhook``, so that a slow receiver
    holds up no other delivery."""
    if len(delivery_ids) == 1:
        _deliver(delivery_ids[0])
        return
    for delivery_id in delivery_ids:
        deliver_webhook.delay(delivery_id)


def _deliver(delivery_id: int) -> None:
    wait = webhooks.deliver(delivery_id)
    if wait is not None:
        deliver_webhook.apply_async((delivery_id,), countdown=wait.total_seconds())


@shared_task(name="agentstate.tasks.send_webhooks", ignore_result=True)
def send_webhooks() -> int:
    """Queue every delivery that is due (left behind by a lost message or a killed
    worker, or a retry whose message was lost): how many. Run it with beat."""
    due = webhooks.due()
    for delivery_id in due:
        deliver_webhook.delay(delivery_id)
    return len(due)


@shared_task(
    name="agentstate.tasks.resume_run",
    ignore_result=True,
    acks_late=True,
    reject_on_worker_lost=True,
    **RETRY_WHEN_DATABASE_DOWN,
)
def resume_run(bridge: str, run_id: str) -> str:
    """Resume a decided run with the bridge registered as ``bridge``
    (``agentstate.contrib.register``): the outcome's status (``busy`` when another
    process already took it). Acknowledged once done: a message whose worker died
    is delivered again (the bridge's lease makes it wait until the state is back)."""
    return contrib.registered(bridge).resume(run_id).status


@shared_task(name="agentstate.tasks.resume_ready", ignore_result=True)
def resume_ready() -> int:
    """Queue ``resume_run`` for every decided run of a registered bridge that nobody
    resumes (its message lost with the broker, or its worker killed mid-resume and
    its lease run out): how many. Run it with beat."""
    queued = 0
    for name, run_id in resumes.ready():
        try:
            contrib.registered(name or "")
        except LookupError:
            continue  # a bridge this site does not run: a resume call resumes it
        resume_run.delay(name, run_id)
        queued += 1
    return queued


class _Publisher:
    """One broker connection and producer of a Celery app, kept across deliveries.

    ``send_task`` without a producer takes one from the app's pool for each message,
    and kombu's Redis transport builds a new client for each publish (about 250
    Python calls, of the 1,740 of a publish). Here the connection and the producer
    last as long as the hand-off thread; on kombu's transports that can group
    publishes (Redis), they run in one publish batch that sends each message at
    once (``max_size=1``) on one kept client. The message is ``send_task``'s own:
    the same task, arguments, routing and options."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self._stack = contextlib.ExitStack()
        try:
            self._connection = self._stack.enter_context(app.connection_for_write())
            self._producer = app.amqp.Producer(self._connection)
            if hasattr(self._producer, "batch"):  # kombu 5.7 and later
                self._stack.enter_context(self._producer.batch(max_size=1))
        except BaseException:
            self._stack.close()
            raise

    @classmethod
    def sending(
        cls, publisher: "_Publisher | None", app: Celery, delivery_ids: list[int]
    ) -> "_Publisher":
        """``delivery_ids`` published on ``publisher`` when it is ``app``'s, else on a new
        one, and after a failure once more on a new one (the broker restarted): the
        publisher to keep. A second failure is raised."""
        if publisher is not None and publisher.app is not app:
            publisher.close()
            publisher = None
        try:
            (publisher := publisher or cls(app)).publish(delivery_ids)
        except Exception:
            (publisher := cls(app)).publish(delivery_ids)
        return publisher

    def publish(self, delivery_ids: list[int]) -> None:
        """One message of ``deliver_webhooks``; the publisher is closed when it fails."""
        try:
            self.app.send_task(deliver_webhooks.name, (delivery_ids,), producer=self._producer)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        # a batch that failed cannot flush: leave it as after an error (discarded)
        with contextlib.suppress(Exception):
            self._stack.__exit__(_Closed, _Closed(), None)


class _Closed(Exception):
    """What a publisher closes its publish batch with, so that the batch drops what
    it may hold (after a failed publish) instead of sending it."""


class _Handoff:
    """Hands delivery ids to the broker from one daemon thread per process, so that
    the change that wrote them does not wait for the broker (a publish costs about
    as much as filing an approval request). The outbox row is already committed: a
    hand-off lost with its process (or a broker that is down) leaves the delivery
    due, and ``send_webhooks`` queues it. At exit the thread is given a moment to
    publish what it holds. The thread keeps its connection to the broker
    (``_Publisher``); a publish that fails is tried once more on a new one (the
    broker restarted), then left to ``send_webhooks``.

    One message (``deliver_webhooks``) carries every id waiting when the thread
    publishes. The first delivery after a quiet ``WEBHOOK_BATCH_WINDOW`` leaves at
    once; while deliveries keep coming, the thread publishes at most once a
    window, so a busy process pays one publish for many deliveries, each delayed
    by at most that much."""

    MOST = 1000  # ids in one message

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._ids: queue.Queue[tuple[Celery, int]] = queue.Queue()

    def put(self, delivery_ids: list[int]) -> None:
        # the caller's Celery app: another thread's would be Celery's default one
        app = current_app._get_current_object()
        self._running()
        for delivery_id in delivery_ids:
            self._ids.put((app, delivery_id))

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every id handed over so far is published (or ``timeout``). Polls,
        so that it also works at interpreter shutdown, when no thread can start."""
        if self._pid != os.getpid():  # nothing handed over in this process
            return True
        deadline = time.monotonic() + timeout
        while self._ids.unfinished_tasks:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def _running(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            # first use, or a forked child (gunicorn, Celery's prefork pool): a
            # thread of its own, and none of the parent's ids or connections
            self._pid, self._ids = os.getpid(), queue.Queue()
            threading.Thread(
                target=self._publish, args=(self._ids,), name="agentstate-webhooks", daemon=True
            ).start()

    @classmethod
    def _publish(cls, ids: "queue.Queue[tuple[Celery, int]]") -> None:
        publisher: _Publisher | None = None
        last = -math.inf
        while True:
            window = agentstate_settings.WEBHOOK_BATCH_WINDOW.total_seconds()
            taken = cls._take(ids, until=last + window)
            last = time.monotonic()
            by_app: dict[Celery, list[int]] = {}
            for app, delivery_id in taken:
                by_app.setdefault(app, []).append(delivery_id)
            for app, delivery_ids in by_app.items():
                try:
                    publisher = _Publisher.sending(publisher, app, delivery_ids)
                except Exception:  # noqa: BLE001 - the beat task sends them; keep publishing
                    publisher = None
                    logger.warning(
                        "could not queue webhook deliveries %s", delivery_ids, exc_info=True
                    )
            for _ in taken:
                ids.task_done()

    @classmethod
    def _take(
        cls, ids: "queue.Queue[tuple[Celery, int]]", until: float
    ) -> list[tuple[Celery, int]]:
        """The next id (waiting for it), then, once ``until`` has come, every id
        waiting by then: at most ``MOST``. The thread sleeps through the window
        rather than waking for each id."""
        taken = [ids.get()]
        time.sleep(max(until - time.monotonic(), 0))
        with contextlib.suppress(queue.Empty):
            while len(taken) < cls.MOST:
                taken.append(ids.get_nowait())
        return taken


handoff = _Handoff()
atexit.register(handoff.flush, 2.0)


def queue_deliveries(delivery_ids: list[int]) -> None:
    """Queue the deliveries an event wrote, once its transaction has committed: handed
    to the broker by a thread of this process, off the caller's path."""
    handoff.put(delivery_ids)


def _deliveries_written(sender: Any, delivery_ids: list[int], **kwargs: Any) -> None:
    queue_deliveries(delivery_ids)


def _resume_when_decided(sender: Any, event: Any, instance: Any, **kwargs: Any) -> None:
    """After a decision commits: if it was the last pending request of a run waiting on
    a registered bridge, queue ``resume_run`` (which takes the run exactly once)."""
    names = contrib.registered_names()
    if instance is None or not names:
        return
    pending = ApprovalRequest.objects.filter(run_id=instance.run_id).filter(
        in_status(ApprovalRequest.Status.PENDING)
    )
    if pending.exists():
        return
    run_id = instance.run.run_id
    name = waiting_on(ServiceStore().peek_state(run_id))
    if name not in names:
        return
    try:
        resume_run.delay(name, run_id)
    except Exception:  # noqa: BLE001 - the decision stands; a resume call still resumes it
        logger.warning("could not queue the resumption of run %s", run_id, exc_info=True)


def connect() -> None:
    """Wire the tasks to the core's signals (``AgentStateConfig.ready`` calls this when
    Celery is installed): webhook deliveries go to the broker after their commit, and
    a decided run of a registered bridge is queued for ``resume_run``."""
    signals.deliveries_written.connect(_deliveries_written, dispatch_uid="agentstate.tasks")
    signals.approval_decided.connect(_resume_when_decided, dispatch_uid="agentstate.tasks")
