"""A minimal site that only adds agentstate: no DRF settings, no extra apps.

Used by ``tests/site/test_fresh_site.py`` to show that the app brings its own
error shape, limits, pagination, permissions and schema.
"""

import os

SECRET_KEY = "fresh-site-test-key"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "agentstate"]
ROOT_URLCONF = "tests.fresh_site.urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["FRESH_SITE_DB"],
        "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20},
    }
}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
