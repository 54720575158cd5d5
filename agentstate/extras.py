"""The optional parts of agentstate and the extra that brings each one's dependencies.

``pip install django-agentstate`` needs Django alone: the models, services,
admin and the ``agentstate_expire`` command work with nothing else. The REST
API (``agentstate.api``), the Celery task (``agentstate.tasks``) and the
framework bridges (``agentstate.contrib.*``) import their dependencies when
they are imported, and raise ``MissingExtra`` naming the extra to install
when one is missing. See docs/installation.md.
"""

from django.core.exceptions import ImproperlyConfigured


class MissingExtra(ImproperlyConfigured, ImportError):
    """A part of agentstate used where the extra it needs is not installed.

    Both ``ImproperlyConfigured`` (what Django reports at startup, e.g. for a
    URLconf that includes ``agentstate.api.urls``) and ``ImportError`` (so
    ``try: import ... except ImportError`` still works).
    """


def missing(extra: str, part: str, error: ImportError) -> MissingExtra:
    """The error for ``part`` needing the ``extra`` that would have brought ``error.name``."""
    return MissingExtra(
        f"{part} needs {error.name or 'a package'} from the {extra!r} extra: "
        f'pip install "django-agentstate[{extra}]"',
        name=error.name,
    )
