"""The demo site under an ASGI server: ``uvicorn project.asgi:application``
(scripts/demo.sh), or gunicorn with uvicorn workers (docs/deployment.md).

agentstate's waiting views (``?wait=``, ``/api/events/stream/``) are async
here: a waiter holds no thread and no database connection. Each ordinary sync
view runs on a thread of its own, so connections are closed after each
request (``AGENTSTATE_ASGI``: CONN_MAX_AGE 0 in project/settings.py): a
persistent connection would be left behind with every thread.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
os.environ.setdefault("AGENTSTATE_ASGI", "1")

from django.conf import settings  # noqa: E402 - after the environment is set
from django.core.asgi import get_asgi_application  # noqa: E402

application = get_asgi_application()

if settings.DEBUG:
    # The admin's CSS and scripts, as runserver serves them (production: collectstatic).
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    application = ASGIStaticFilesHandler(application)
