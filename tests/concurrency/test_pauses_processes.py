"""Across nodes: two server processes on one database still let exactly one claim win.

The servers are real gunicorn processes of the demo site, started against
the test database (its name is handed to them in the environment).
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from agentstate.conf import agentstate_settings
from project.database import url_of

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db(transaction=True)


def site_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment for a demo-site subprocess that uses the test database."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "PYTHONPATH": str(ROOT),
        "AGENTSTATE_VAR_DIR": str(tmp_path),
        "DJANGO_DEBUG": "0",
        **extra,
    }
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        env.pop("DATABASE_URL", None)
        env["SQLITE_PATH"] = str(db["NAME"])
    else:
        env["DATABASE_URL"] = url_of(db)
    # the backend under test, the portable one forced on PostgreSQL say
    if agentstate_settings.BACKEND:
        env["AGENTSTATE_BACKEND"] = agentstate_settings.BACKEND
    return env


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base: str, token: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def wait_until_serving(base: str, token: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server process ended"
        try:
            if call(base, token, "/api/pauses/")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{base} did not start serving")


def test_two_server_processes_let_exactly_one_of_fifty_claims_win(tmp_path, make_user):
    token = Token.objects.create(user=make_user("alice")).key
    env = site_env(tmp_path)
    bases, servers = [], []
    try:
        for _ in range(2):
            port = free_port()
            bases.append(f"http://127.0.0.1:{port}")
            servers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "gunicorn",
                        "project.wsgi:application",
                        "--bind",
                        f"127.0.0.1:{port}",
                        "--workers",
                        "1",
                        "--threads",
                        "8",
                        "--log-level",
                        "warning",
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=open(tmp_path / f"server-{port}.log", "w"),
                )
            )
        for base, server in zip(bases, servers, strict=True):
            wait_until_serving(base, token, server)

        status, created = call(
            bases[0],
            token,
            "/api/pauses/",
            {"chat_id": "chat", "tool_call_id": "call", "owner": "alice", "payload": {"n": 1}},
        )
        assert status == 201, created
        claim = {"chat_id": "chat", "tool_call_id": "call", "question_id": created["question_id"]}
        barrier = threading.Barrier(50)
        answers: list = [None] * 50

        def claimer(i: int) -> None:
            barrier.wait()
            try:
                answers[i] = call(bases[i % 2], token, "/api/pauses/claim/", claim)
            except Exception as error:  # noqa: BLE001 - reported below
                answers[i] = error

        threads = [threading.Thread(target=claimer, args=(i,)) for i in range(50)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)

        won = [a for a in answers if isinstance(a, tuple) and a[0] == 200]
        refused = [
            a
            for a in answers
            if isinstance(a, tuple) and a[0] == 409 and a[1]["code"] == "already_claimed"
        ]
        assert (len(won), len(refused)) == (1, 49), answers
        assert won[0][1]["status"] == "claimed" and won[0][1]["payload"] == {"n": 1}
        assert call(bases[1], token, "/api/pauses/")[1]["results"][0]["status"] == "claimed"
    finally:
        for server in servers:
            stop(server)
