"""Settings of the agentstate demo site.

PostgreSQL or MySQL/MariaDB from ``DATABASE_URL`` (``postgres://user@host:port/db``,
``mysql://user@host:port/db``: see ``project.database``) when set, else a SQLite file (``SQLITE_PATH``, default ``var/db.sqlite3``) in IMMEDIATE
transaction mode with a busy timeout. Celery uses Redis when ``REDIS_URL`` is
set, else a broker on the local file system that needs no service.
"""

import os
import sys
from datetime import timedelta
from pathlib import Path

from project.database import from_url, transaction_pooled

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("AGENTSTATE_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "demo-only-insecure-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = os.environ.get(
    "DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver"
).split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "agentstate",
    "project",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

SQLITE_PATH = Path(os.environ.get("SQLITE_PATH", VAR_DIR / "db.sqlite3"))

# runserver serves each request on a new thread: a persistent connection per
# thread would outlive it, and concurrent clients would exhaust PostgreSQL's
# connections. So connections close after each request there, by default.
RUNSERVER = sys.argv[1:2] == ["runserver"]
# Under an ASGI server (project/asgi.py sets AGENTSTATE_ASGI) each sync view runs on
# a thread of its own too: the same rule, or every thread would leave a connection.
ASGI = os.environ.get("AGENTSTATE_ASGI") == "1"

if os.environ.get("DATABASE_URL"):
    DATABASES = {
        "default": from_url(
            os.environ["DATABASE_URL"],
            conn_max_age=int(os.environ.get("CONN_MAX_AGE", "0" if RUNSERVER or ASGI else "60")),
        )
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": SQLITE_PATH,
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 30},
            # A file, not memory: concurrency tests use several connections.
            "TEST": {"NAME": SQLITE_PATH.with_name("test_" + SQLITE_PATH.name)},
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"agentstate": {"handlers": ["console"], "level": "INFO"}},
}

# Only authentication is the site's choice; agentstate's views bring the rest.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agentstate.api.authentication.TokenAuthentication",
        "rest_framework.authentication.BasicAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
}

AGENTSTATE = {
    "PAUSE_TTL": timedelta(days=1),
    "RETENTION": timedelta(days=30),
    # Webhooks to this machine's own receivers (a demo, the tests) need it.
    "WEBHOOK_ALLOW_PRIVATE": os.environ.get("AGENTSTATE_WEBHOOK_ALLOW_PRIVATE") == "1",
    "WEBHOOK_BACKOFF": float(os.environ.get("AGENTSTATE_WEBHOOK_BACKOFF", "5")),
    "WEBHOOK_TIMEOUT": float(os.environ.get("AGENTSTATE_WEBHOOK_TIMEOUT", "10")),
    "RESUME_LEASE": float(os.environ.get("AGENTSTATE_RESUME_LEASE", "900")),
    "APPROVAL_TTL": float(os.environ.get("AGENTSTATE_APPROVAL_TTL", "86400")),
    # LISTEN needs a session of its own, which a pooler in transaction mode does not
    # keep: there, waiters are woken by a poll of the event log.
    "LISTEN": os.environ.get("AGENTSTATE_LISTEN", "0" if transaction_pooled() else "1") == "1",
}
# Another storage backend for every database (a dotted path): the portable
# agentstate.backends.orm.ORMBackend on PostgreSQL, say.
if os.environ.get("AGENTSTATE_BACKEND"):
    AGENTSTATE["BACKEND"] = os.environ["AGENTSTATE_BACKEND"]

# Celery: Redis when REDIS_URL is set, else a file-system transport.
CELERY_BROKER_DIR = VAR_DIR / "celery-broker"
if os.environ.get("REDIS_URL"):
    CELERY_BROKER_URL = os.environ["REDIS_URL"]
    # A message taken by a worker that died unacknowledged (resume_run and
    # deliver_webhook acknowledge late) is delivered again after this many seconds.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": float(os.environ.get("CELERY_VISIBILITY_TIMEOUT", "3600"))
    }
else:
    CELERY_BROKER_URL = "filesystem://"
    # kombu's transport, with messages written whole (see project/broker.py)
    CELERY_BROKER_TRANSPORT = "project.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR),
        "data_folder_out": str(CELERY_BROKER_DIR),
        "processed_folder": str(CELERY_BROKER_DIR / "processed"),
        "control_folder": str(CELERY_BROKER_DIR / "control"),
        "store_processed": False,
    }
    for folder in (
        CELERY_BROKER_DIR,
        CELERY_BROKER_DIR / "processed",
        CELERY_BROKER_DIR / "control",
    ):
        folder.mkdir(parents=True, exist_ok=True)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE = {
    "agentstate-expire-pauses": {
        "task": "agentstate.tasks.expire_pauses",
        "schedule": float(os.environ.get("AGENTSTATE_SWEEP_SECONDS", "60")),
    },
    # Webhook deliveries a lost broker message or a killed worker left behind.
    "agentstate-send-webhooks": {
        "task": "agentstate.tasks.send_webhooks",
        "schedule": float(os.environ.get("AGENTSTATE_WEBHOOK_SECONDS", "60")),
    },
    # Resumes of bridged runs a lost broker message or a killed worker left behind.
    "agentstate-resume-ready": {
        "task": "agentstate.tasks.resume_ready",
        "schedule": float(os.environ.get("AGENTSTATE_RESUME_SECONDS", "60")),
    },
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
