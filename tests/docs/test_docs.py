"""The documentation covers what the code offers, and the repository points nowhere else.

``mkdocs build --strict`` (in scripts/test.sh) catches broken links; these
tests catch what a link checker cannot: a REST path, a setting, an event
kind or a signal added to the code and not to its reference page.
"""

import re
import subprocess
from pathlib import Path

import pytest
from django.urls import URLPattern, URLResolver

from agentstate import signals
from agentstate.api import urls as api_urls
from agentstate.conf import DEFAULTS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def documented_paths() -> set[str]:
    """Every ``METHOD /api/...`` path the REST reference names, placeholders as ``{}``."""
    text = (DOCS / "rest-api.md").read_text()
    return {
        re.sub(r"\{[^}]*\}", "{}", path)
        for path in re.findall(r"`(?:[A-Z]+ )?(/api/[^`?\s]*)", text)
    }


def api_paths() -> set[str]:
    paths = set()
    for pattern in api_urls.urlpatterns:
        assert isinstance(pattern, URLPattern) and not isinstance(pattern, URLResolver)
        if pattern.callback in (api_urls.with_slash, api_urls.not_found):
            continue  # a path without its slash, redirected; any other path beneath
        route = re.sub(r"<(?:\w+:)?\w+>", "{}", str(pattern.pattern))
        paths.add("/api/" + route)
    return paths


def test_the_rest_reference_names_every_path():
    missing = api_paths() - documented_paths()
    assert not missing, f"docs/rest-api.md does not describe {sorted(missing)}"


def test_the_settings_page_names_every_setting():
    text = (DOCS / "settings.md").read_text()
    missing = [key for key in DEFAULTS if f"`{key}`" not in text]
    assert not missing, f"docs/settings.md does not describe {missing}"


def test_the_events_page_names_every_kind_and_signal():
    text = (DOCS / "events.md").read_text()
    names = [name for name, value in vars(signals).items() if isinstance(value, signals.Signal)]
    missing = [f"`{kind}`" for kind in signals.BY_KIND if f"`{kind}`" not in text]
    missing += [f"`{name}`" for name in names if f"`{name}`" not in text]
    assert not missing, f"docs/events.md does not describe {missing}"


@pytest.mark.parametrize(
    "pattern", [r"SPEC\.md", r"\.\./shared", r"SPEC section", r"\bSPEC \d", r"the SPEC\b"]
)
def test_nothing_in_the_repository_points_outside_it(pattern):
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    hits = []
    for name in filter(None, tracked):
        path = ROOT / name.decode()
        if path.suffix in {".png", ".lock"} or not path.is_file() or path == Path(__file__):
            continue
        text = path.read_text(errors="replace")
        hits += [f"{name.decode()}: {m.group(0)}" for m in re.finditer(pattern, text)]
    assert not hits, hits
