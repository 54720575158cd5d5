"""The README's two commands side by side in one checkout.

This test runs inside ``scripts/test.sh``'s environment (``.venv/``) and starts
the real ``scripts/demo.sh`` beside it, on a port and a ``var/`` folder of its
own: the demo installs into ``.venv-demo/``, migrates its own SQLite file and
serves, while every package of the suite's environment stays installed and
importable.
"""

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from django.conf import settings

from tests.hardening import free_port

ROOT = Path(__file__).resolve().parents[2]

# What the demo's environment lacks and the suite cannot run without.
SUITE_ONLY = ("pytest", "pytest_django", "xdist", "langgraph", "playwright", "hypothesis")

LISTING = (
    "import importlib, importlib.metadata as m;"
    f"[importlib.import_module(name) for name in {SUITE_ONLY!r}];"
    "print('\\n'.join(sorted(f'{d.name}=={d.version}' for d in m.distributions())))"
)


def suite_environment() -> str:
    """The suite's installed distributions, read afresh after importing what it needs."""
    done = subprocess.run(
        [sys.executable, "-c", LISTING], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def serving(url: str, process: subprocess.Popen, log: Path, timeout: float = 900) -> None:
    """Wait for the demo to answer; the first run installs its environment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"scripts/demo.sh ended early:\n{log.read_text()}"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(1)
    raise AssertionError(f"scripts/demo.sh did not serve in {timeout:.0f}s:\n{log.read_text()}")


def test_the_demo_runs_beside_the_suite_and_leaves_its_environment_alone(tmp_path):
    before = suite_environment()
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        # the demo's own settings, database and broker, as a new user runs it
        if key
        not in {
            "DJANGO_SETTINGS_MODULE",
            "DATABASE_URL",
            "DATABASE_POOLING",
            "REDIS_URL",
            "VIRTUAL_ENV",
        }
        and key != "AGENTSTATE_DJANGO"
    }
    var = tmp_path / "var"
    env.update(PORT=str(port), AGENTSTATE_VAR_DIR=str(var), DEMO_PASSWORD="side-by-side")
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        demo = subprocess.Popen(
            ["bash", str(ROOT / "scripts/demo.sh")],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        serving(f"http://127.0.0.1:{port}/api/schema/", demo, log)

        # The suite's environment is as it was, and still runs the suite.
        assert suite_environment() == before
        # The demo's is its own, exactly the demo's set: no test tool in it.
        missing = subprocess.run(
            [str(ROOT / ".venv-demo/bin/python"), "-c", "import pytest"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "No module named 'pytest'" in missing.stderr
        # Its database is in its own var/ folder, never the suite's file.
        assert (var / "db.sqlite3").is_file()
        assert Path(settings.DATABASES["default"]["NAME"]) != var / "db.sqlite3"
    finally:
        stop(demo)


def stop(demo: subprocess.Popen) -> None:
    """The demo's whole process group: the script, its server and its Celery worker."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(demo.pid, sig)
        except ProcessLookupError:
            return
        try:
            demo.wait(wait)
        except subprocess.TimeoutExpired:
            continue
