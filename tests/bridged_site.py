"""The demo site's settings with ``tests.bridged``, whose bridge a Celery worker resumes."""

from project.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.bridged.BridgedConfig"]  # noqa: F405
