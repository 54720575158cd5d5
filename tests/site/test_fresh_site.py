"""agentstate behaves the same in a site that only adds it to INSTALLED_APPS."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def in_fresh_site(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.fresh_site.settings",
        "FRESH_SITE_DB": str(tmp_path / "fresh.sqlite3"),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_a_fresh_site_gets_the_same_api(tmp_path):
    done = in_fresh_site(tmp_path, str(ROOT / "tests/fresh_site/probe.py"))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["put"][0] == 200
    assert json.loads(out["put"][1])["version"] == 1
    assert out["bad"][0] == 400
    assert json.loads(out["bad"][1]) == {
        "detail": "nope: Unknown field.",
        "code": "invalid",
        "field": "nope",
    }
    assert out["missing"][0] == 404
    assert json.loads(out["missing"][1])["code"] == "scope_not_found"
    assert json.loads(out["scopes"][1])["count"] == 1
    assert out["schema"][0] == 200
    assert out["docs"][0] == out["redoc"][0] == out["asset"][0] == 200
    assert "/api/docs/assets/swagger-ui-bundle.js" in out["docs"][1]
    assert "/api/docs/assets/redoc.standalone.js" in out["redoc"][1]
    assert out["no_asset"][0] == 404
    assert out["anonymous"] == 401


def test_a_fresh_site_passes_its_checks(tmp_path):
    done = in_fresh_site(tmp_path, "-m", "django", "check", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
