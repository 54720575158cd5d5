"""Settings for agentstate, read from the ``AGENTSTATE`` dict of the site.

Resolved lazily and reloaded on ``setting_changed``, the way DRF's
``api_settings`` works, so tests can use ``override_settings``. Nothing here
changes the database schema.
"""

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

DEFAULTS: dict[str, Any] = {
    # How long a pause waits for its owner before it expires.
    "PAUSE_TTL": timedelta(days=1),
    # The largest ``ttl_seconds`` a REST client may ask for.
    "MAX_PAUSE_TTL": timedelta(days=30),
    # How long a pending approval request waits before it expires.
    "APPROVAL_TTL": timedelta(days=1),
    # Resolved and expired pauses older than this are deleted by the sweep.
    "RETENTION": timedelta(days=30),
    # Rows the sweep updates or deletes per statement.
    "SWEEP_BATCH_SIZE": 1000,
    # REST request bodies larger than this are refused with 413.
    "MAX_BODY_BYTES": 1024 * 1024,
    # REST request bodies nested deeper than this are refused with 400.
    "MAX_JSON_DEPTH": 64,
    # Page size of the REST list endpoints (``?page_size=`` may lower it).
    "PAGE_SIZE": 50,
    "MAX_PAGE_SIZE": 500,
    # The longest ``?wait=`` (seconds) a REST client may ask for: long-polls of a
    # request, a run or the event feed.
    "MAX_WAIT": 60,
    # On PostgreSQL, whether waiters are woken by LISTEN/NOTIFY (one connection per
    # process); False: by a poll of the event log every half second, as on other
    # databases (behind PgBouncer in transaction pooling, where LISTEN hears nothing).
    "LISTEN": True,
    # Webhooks: tries per delivery, the first retry's delay (doubling, with
    # jitter), the time a receiver has to answer, and whether private,
    # loopback and link-local addresses may be targets.
    "WEBHOOK_ATTEMPTS": 8,
    "WEBHOOK_BACKOFF": timedelta(seconds=5),
    "WEBHOOK_TIMEOUT": timedelta(seconds=10),
    "WEBHOOK_ALLOW_PRIVATE": False,
    # How long a process gathers the deliveries it hands to the broker into one
    # message while they keep coming (the first after a quiet spell leaves at once).
    "WEBHOOK_BATCH_WINDOW": timedelta(milliseconds=50),
    # Events (and their deliveries' attempts) older than this are deleted by the sweep.
    "EVENT_RETENTION": timedelta(days=90),
    # Whether the admin's page of a user shows (and edits) the user's budget.
    "USER_BUDGET_INLINE": True,
    # LangGraph threads (``AgentStateSaver``) not written for longer than this are
    # deleted by the sweep, with their checkpoints; ``None``: kept.
    "THREAD_TTL": None,
    # How long a resume of a bridged run may hold the run's state before it counts
    # as lost with its process (a worker killed mid-resume) and ``resume_ready``
    # (Celery beat) puts the state back and queues the resume again. Longer than
    # the longest resume.
    "RESUME_LEASE": timedelta(minutes=15),
    # The storage backend class for every database (a dotted path); ``None``:
    # PostgreSQL's own on PostgreSQL, the portable ORM backend elsewhere.
    "BACKEND": None,
}

DURATIONS = (
    "PAUSE_TTL",
    "MAX_PAUSE_TTL",
    "APPROVAL_TTL",
    "RETENTION",
    "WEBHOOK_BACKOFF",
    "WEBHOOK_TIMEOUT",
    "WEBHOOK_BATCH_WINDOW",
    "EVENT_RETENTION",
    "RESUME_LEASE",
)
# Durations that may also be ``None`` (never).
OPTIONAL_DURATIONS = ("THREAD_TTL",)
POSITIVE_INTS = (
    "SWEEP_BATCH_SIZE",
    "MAX_BODY_BYTES",
    "MAX_JSON_DEPTH",
    "PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "WEBHOOK_ATTEMPTS",
)
# Numbers of seconds above 0 (fractions allowed).
POSITIVE_NUMBERS = ("MAX_WAIT",)


class AgentStateSettings:
    """Attribute access to ``settings.AGENTSTATE`` with defaults filled in."""

    # Each setting as ``validate`` (the system checks) requires it; read by ``__getattr__``.
    PAUSE_TTL: timedelta
    MAX_PAUSE_TTL: timedelta
    APPROVAL_TTL: timedelta
    RETENTION: timedelta
    SWEEP_BATCH_SIZE: int
    MAX_BODY_BYTES: int
    MAX_JSON_DEPTH: int
    PAGE_SIZE: int
    MAX_PAGE_SIZE: int
    MAX_WAIT: float
    LISTEN: bool
    WEBHOOK_ATTEMPTS: int
    WEBHOOK_BACKOFF: timedelta
    WEBHOOK_TIMEOUT: timedelta
    WEBHOOK_ALLOW_PRIVATE: bool
    EVENT_RETENTION: timedelta
    USER_BUDGET_INLINE: bool
    THREAD_TTL: timedelta | None
    RESUME_LEASE: timedelta
    BACKEND: str | None

    def __init__(self) -> None:
        self._cached: set[str] = set()

    @property
    def user_settings(self) -> dict[str, Any]:
        if not hasattr(self, "_user_settings"):
            self._user_settings = getattr(settings, "AGENTSTATE", {}) or {}
        return self._user_settings

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"Invalid agentstate setting: {name!r}")
        value = self.user_settings.get(name, DEFAULTS[name])
        if name in DURATIONS + OPTIONAL_DURATIONS and isinstance(value, int | float):
            value = timedelta(seconds=value)
        self._cached.add(name)
        setattr(self, name, value)
        return value

    def validate(self) -> list[str]:
        """Every problem with the configured values, as messages."""
        problems = [f"unknown key {key!r}" for key in self.user_settings if key not in DEFAULTS]
        for name in DURATIONS:
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value <= timedelta(0):
                problems.append(f"{name} must be a positive duration (timedelta or seconds)")
        for name in OPTIONAL_DURATIONS:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
                problems.append(
                    f"{name} must be a positive duration (timedelta or seconds), or None"
                )
        backend: object = self.BACKEND  # as configured, before it is known to be valid
        if backend is not None and not isinstance(backend, str):
            problems.append("BACKEND must be a dotted path to a backend class, or None")
        for name in POSITIVE_INTS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                problems.append(f"{name} must be a positive integer")
        for name in POSITIVE_NUMBERS:
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
                problems.append(f"{name} must be a positive number of seconds")
        return problems

    def reload(self) -> None:
        for name in self._cached:
            delattr(self, name)
        self._cached.clear()
        if hasattr(self, "_user_settings"):
            delattr(self, "_user_settings")


agentstate_settings = AgentStateSettings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "AGENTSTATE":
        agentstate_settings.reload()


setting_changed.connect(_reload)
