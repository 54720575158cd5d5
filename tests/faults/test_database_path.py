"""Faults between the app servers and PostgreSQL, under load from eight HTTP clients
pushing and claiming (``tests.test_outage.Load``) against gunicorn:

- PgBouncer (Debian's, the test's own on a private port) killed and started again:
  no acknowledged write lost or doubled, service back at once;
- the database unreachable (a TCP proxy of the test's own stopped, connections cut
  and refused) for ``AGENTSTATE_OUTAGE_SECONDS`` (5; the reliability command runs
  30): 503 ``unavailable`` with ``Retry-After``, never a 500 and never a hang,
  full service within 5 s of its return.
"""

import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.authtoken.models import Token

from tests.faults.processes import ROOT, figures
from tests.faults.proxy import TcpProxy
from tests.faults.test_outage import Load
from tests.hardening import LiveServer, database_env, free_port

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]


def served(url: str, **extra: str):
    """gunicorn on the test database reached at ``url``; a token and 100 pauses."""
    env = {**database_env(), "DATABASE_URL": url, **extra}
    token = Token.objects.create(user=User.objects.create_user("agent")).key
    server = LiveServer(env, workers=2, threads=8)
    return server, token


def make_pauses(server: LiveServer, token: str) -> list[dict]:
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    pauses = []
    for n in range(100):
        key = {"chat_id": "fault", "tool_call_id": f"call-{n}"}
        body = {**key, "owner": "agent", "payload": {"n": n}}
        created = session.post(f"{server.url}/api/pauses/", json=body, timeout=30)
        assert created.status_code == 201, created.text
        pauses.append({**key, "question_id": created.json()["question_id"]})
    return pauses


def under_load(server, token, cut, restore, seconds: float, probe=None) -> dict:
    """Load, ``cut()``, ``seconds`` of outage (``probe(session)`` meanwhile),
    ``restore()``, load again; checks every acknowledged push: the figures."""
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    pauses = make_pauses(server, token)
    with Load(server.url, token, pauses) as load:
        load.wait(lambda: load.successes >= 200, "load before the fault")
        cut()
        began = time.monotonic()
        if probe is not None:
            probe(session)
        time.sleep(max(0.0, seconds - (time.monotonic() - began)))
        successes = load.successes
        restore()
        back_in = load.wait(lambda: load.successes > successes + 10, "service after the fault")
        load.wait(lambda: load.successes >= successes + 300, "load after the fault")
    assert not load.unexpected, load.unexpected[:5]  # never a 500
    hung = {k: v for k, v in load.statuses.items() if not isinstance(k, int)}
    assert not hung, f"requests failed without an answer: {hung}"
    assert all(count == 1 for count in load.claims_won.values()), "a pause claimed twice"
    assert "Traceback" not in server.output(), server.output()
    counts = load.check_pushes(session)
    return {
        **counts,
        "claims_won": len(load.claims_won),
        "answers": dict(load.statuses),
        "back_in_s": round(back_in, 2),
    }


def test_pgbouncer_restarted_under_load_loses_and_doubles_no_acknowledged_write():
    folder = Path(tempfile.mkdtemp(prefix="agentstate-pgbouncer-"))
    os.chmod(folder, 0o777)
    env = {**os.environ, "PGBOUNCER_PORT": str(free_port()), "PGBOUNCER_DIR": str(folder)}

    def pgbouncer(*args: str) -> None:
        result = subprocess.run(
            ["scripts/pgbouncer.sh", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout + result.stderr

    def kill() -> None:
        pid = int((folder / "pgbouncer.pid").read_text())
        os.kill(pid, 9)
        while Path(f"/proc/{pid}").exists():
            time.sleep(0.05)

    db = connection.settings_dict
    url = f"postgres://postgres@127.0.0.1:{env['PGBOUNCER_PORT']}/{db['NAME']}"
    pgbouncer()
    try:
        server, token = served(url, DATABASE_POOLING="transaction")
        with server:
            counts = under_load(server, token, kill, pgbouncer, 1.0)
    finally:
        pgbouncer("stop")
    figures("pgbouncer-restarted", **counts)


def test_database_unreachable_answers_503_then_full_service_within_5_seconds():
    seconds = float(os.environ.get("AGENTSTATE_OUTAGE_SECONDS", "5"))
    db = connection.settings_dict
    proxy = TcpProxy(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432))
    proxy.start()
    probes: list[requests.Response] = []

    def probe(session: requests.Session) -> None:
        for _ in range(3):
            began = time.monotonic()
            answer = session.get(f"{server.url}/api/scopes/", timeout=30)
            probes.append(answer)
            assert time.monotonic() - began < 30
            time.sleep(0.5)

    try:
        server, token = served(f"postgres://postgres@127.0.0.1:{proxy.port}/{db['NAME']}")
        with server:
            counts = under_load(server, token, proxy.stop, proxy.start, seconds, probe)
    finally:
        proxy.stop()
    for answer in probes:
        assert answer.status_code == 503, answer.text
        assert answer.json()["code"] == "unavailable"
        assert answer.headers["Retry-After"] == "1"
    assert counts["answers"].get(503, 0) > 0, "the outage was never seen"
    assert counts["back_in_s"] <= 5, counts
    figures(f"database-unreachable-{seconds:g}s", **counts)
