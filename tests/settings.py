"""Settings of the test suite (``DJANGO_SETTINGS_MODULE=tests.settings``).

PostgreSQL from ``DATABASE_URL`` when set, else a SQLite *file* (several
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

import dj_database_url

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
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"])}
    # Behind PgBouncer in transaction pooling mode, as the demo site does.
    POOLED = os.environ.get("DATABASE_POOLING") == "transaction"
    if POOLED:
        DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    # Prepared statements as the demo site has them: on a direct connection only.
    PREPARE_THRESHOLD = os.environ.get("DATABASE_PREPARE_THRESHOLD", "" if POOLED else "5")
    if PREPARE_THRESHOLD:
        DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = int(PREPARE_THRESHOLD)
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(SQLITE_PATH),
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

AGENTSTATE: dict[str, Any] = {}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"agentstate": {"handlers": ["console"], "level": "INFO"}},
}
