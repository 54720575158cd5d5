"""Settings of the test suite (``DJANGO_SETTINGS_MODULE=tests.settings``).

PostgreSQL or MySQL/MariaDB from ``DATABASE_URL`` when set (as
``project.database`` sets it up), else a SQLite *file* (several
connections share it, so the concurrency tests run on both) in the system's
temporary folder, named after this checkout so that two checkouts never
share one. Importing this module creates nothing: pytest-django creates the
test database, and the tests that run the demo site or a Celery worker give
them folders of their own.
"""

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from project.database import from_url, transaction_pooled

ROOT = Path(__file__).resolve().parent.parent

SECRET_KEY = "agentstate-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]", "testserver"]

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

ROOT_URLCONF = "tests.urls"

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

CHECKOUT = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
SQLITE_PATH = Path(tempfile.gettempdir()) / f"agentstate-tests-{CHECKOUT}.sqlite3"

if os.environ.get("DATABASE_URL"):
    # As the demo site sets it up: PostgreSQL or MySQL/MariaDB, PgBouncer's pooling.
    DATABASES = {"default": from_url(os.environ["DATABASE_URL"])}
else:
    # Under pytest-xdist pytest-django names each worker's file SQLITE_PATH_gw0,
    # _gw1...: a server or worker that a test starts on these settings inherits
    # PYTEST_XDIST_WORKER, and so opens its test's file.
    WORKER = os.environ.get("PYTEST_XDIST_WORKER")
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": f"{SQLITE_PATH}_{WORKER}" if WORKER else str(SQLITE_PATH),
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 30},
            "TEST": {"NAME": str(SQLITE_PATH)},
        }
    }

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The demo site's authentication: agentstate's token authentication first.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agentstate.api.authentication.TokenAuthentication",
        "rest_framework.authentication.BasicAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
}

# LISTEN needs a session of its own: behind PgBouncer in transaction mode the
# waiters are woken by a poll of the event log, as the docs tell such a site to.
AGENTSTATE: dict[str, Any] = {"LISTEN": not transaction_pooled()}
# The backend under test on every database (the portable one on PostgreSQL, say).
if os.environ.get("AGENTSTATE_BACKEND"):
    AGENTSTATE["BACKEND"] = os.environ["AGENTSTATE_BACKEND"]

# The suite's users log in with "pw" at most: Django's default hasher (a million
# PBKDF2 rounds, by design slow) would cost most tests a CPU-second for nothing.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"agentstate": {"handlers": ["console"], "level": "INFO"}},
}
