"""agentstate without its extras: Django alone runs the core, and each missing part says why.

A site with nothing but Django and agentstate (``tests/fresh_site/core_settings.py``)
runs in a subprocess in which DRF, Celery, the Agents SDK, LangGraph, Pydantic AI,
httpx and psycopg cannot be imported: the models, services, admin and the expiry
command work; the REST API's URLconf, the Celery task, the SDK bridge, the
LangGraph adapter and the Pydantic AI bridge raise
``MissingExtra`` (an ``ImproperlyConfigured`` and an ``ImportError``) naming
the extra to install.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def core_site(tmp_path_factory):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.fresh_site.core_settings",
        "FRESH_SITE_DB": str(tmp_path_factory.mktemp("core") / "core.sqlite3"),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests/fresh_site/core_probe.py")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_core_works_with_django_alone(core_site):
    assert core_site["context"] == {"x": [1, 2]}
    assert core_site["claimed"] == {"step": 1}
    assert core_site["index"] == 200
    assert set(core_site["admin"].values()) == {200}
    assert "expired pauses: 0" in core_site["expire"]
    assert core_site["loaded"] == []


@pytest.mark.parametrize(
    "part, extra",
    [
        ("api", "api"),
        ("tasks", "celery"),
        ("agents", "agents"),
        ("langgraph", "langgraph"),
        ("pydantic_ai", "pydantic-ai"),
    ],
)
def test_a_part_without_its_extra_names_it(core_site, part, extra):
    name, is_import_error, message = core_site[part]
    assert (name, is_import_error) == ("MissingExtra", True)
    assert f'pip install "django-agentstate[{extra}]"' in message
