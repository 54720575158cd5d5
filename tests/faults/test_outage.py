"""The database down or gone mid-request: 503 ``unavailable``,
nothing half-written, and the service back once the database is.

The restart test runs its own throwaway PostgreSQL cluster (never the
shared one): gunicorn serves the demo site on it, threads push and claim
over HTTP, the cluster is stopped hard and started again, and then every
acknowledged push must be stored, in order, once; no pause claimed twice.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import psycopg
import pytest
import requests
from django.db import connection

from agentstate.models import Scope, Variable
from tests.hardening import ROOT, LiveServer, database_env, free_port, row_counts

# Connection refused at request start (both databases)


@pytest.mark.django_db(transaction=True)
def test_unreachable_database_answers_503_then_reconnects_when_it_is_back(api):
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "postgresql":
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()))
    else:
        connection.settings_dict["NAME"] = str(
            Path(tempfile.gettempdir()) / "no-such-dir" / "db.sqlite3"
        )
    try:
        down = api.post(
            "/api/context/push/", {"scope": "s", "name": "n", "value": 1}, format="json"
        )
        assert down.status_code == 503, down.content
        assert down.json()["code"] == "unavailable" and "database" in down.json()["detail"]
        assert down["Retry-After"] == "1"
        listing = api.get("/api/scopes/")
        assert listing.status_code == 503 and listing.json()["code"] == "unavailable"
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    before = row_counts()
    assert before["agentstate.Scope"] == 0, "the refused push stored something"
    back = api.post("/api/context/push/", {"scope": "s", "name": "n", "value": 1}, format="json")
    assert back.status_code == 200, back.content
    assert Variable.objects.get(scope__key="s").length == 1


# A connection lost mid-request (PostgreSQL: killed by the server)


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_connection_killed_between_requests_answers_503_once_then_reconnects(api):
    assert (
        api.put("/api/context/", {"scope": "s", "name": "n", "value": 1}, format="json").status_code
        == 200
    )
    with connection.cursor() as cursor:  # the server's own pid and port, also behind a pooler
        cursor.execute("SELECT pg_backend_pid(), inet_server_port()")
        pid, server_port = cursor.fetchone()
    settings = connection.settings_dict
    with psycopg.connect(  # straight to the server, never through the pooler
        host=settings["HOST"] or "127.0.0.1",
        port=server_port,
        user=settings["USER"] or "postgres",
        password=settings["PASSWORD"] or None,
        dbname=settings["NAME"],
        autocommit=True,
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    lost = api.put("/api/context/", {"scope": "s", "name": "n", "value": 2}, format="json")
    if behind_a_pooler():
        # The pooler keeps the client's connection. If it noticed the server
        # connection's end first, the request gets another one and succeeds; if not,
        # the request meets the dead one: 503 once, having changed nothing, and the
        # retry succeeds. Either way the change is made exactly once.
        if lost.status_code == 503:
            assert lost.json()["code"] == "unavailable", lost.content
            assert Variable.objects.get(scope__key="s").value == 1
            lost = api.put("/api/context/", {"scope": "s", "name": "n", "value": 2}, format="json")
        assert lost.status_code == 200 and lost.json()["version"] == 2, lost.content
        assert Variable.objects.get(scope__key="s").value == 2
        return
    assert lost.status_code == 503 and lost.json()["code"] == "unavailable", lost.content
    again = api.put("/api/context/", {"scope": "s", "name": "n", "value": 3}, format="json")
    assert again.status_code == 200, again.content
    assert again.json()["version"] == 2, "the lost request changed the variable"
    assert Scope.objects.count() == 1


def behind_a_pooler() -> bool:
    """Whether the connection reaches PostgreSQL through a pooler (PgBouncer): the
    server listens on another port than the one the settings name."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT inet_server_port()")
        (server_port,) = cursor.fetchone()
    return str(server_port) != str(connection.settings_dict["PORT"] or 5432)


# PostgreSQL stopped under load, then started again


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name)]
    assert found and found[-1], f"{name} not found"
    return found[-1]


class ThrowawayCluster:
    """A PostgreSQL cluster of its own in a temporary directory, on a free port."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="agentstate-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0  # initdb refuses to run as root
        if self.as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run(
            _pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync"
        )

    def _run(self, *args: str) -> None:
        command = ["runuser", "-u", "postgres", "--", *args] if self.as_postgres else list(args)
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=60"
        )
        self._run(
            _pg_bin("pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.dir / "log"),
            "-w",
            "start",
        )

    def stop(self) -> None:
        """Stopped hard, like a crash: clients are cut off, recovery replays the WAL."""
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/agentstate_restart"

    def remove(self) -> None:
        subprocess.run(
            (["runuser", "-u", "postgres", "--"] if self.as_postgres else [])
            + [_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def cluster():
    cluster = ThrowawayCluster()
    try:
        cluster.start()
        with psycopg.connect(
            f"host=127.0.0.1 port={cluster.port} user=postgres dbname=postgres", autocommit=True
        ) as c:
            c.execute("CREATE DATABASE agentstate_restart")
        yield cluster
    finally:
        cluster.remove()


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


class Load:
    """Threads pushing to their own list and claiming shared pauses until told to stop."""

    EXPECTED = {200, 409, 503}  # pushed or claimed; already claimed; database unavailable

    def __init__(self, url: str, token: str, pauses: list[dict], workers: int = 8) -> None:
        self.url, self.token, self.pauses, self.workers = url, token, pauses, workers
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: dict[int, list[int]] = defaultdict(
            list
        )  # worker -> values acknowledged, in order
        self.attempted: dict[int, set[int]] = defaultdict(set)
        self.claims_won: Counter = Counter()
        self.statuses: Counter = Counter()
        self.unexpected: list[str] = []
        self.successes = 0
        self.failures = 0

    def _worker(self, worker: int) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Token {self.token}"
        i = 0
        while not self.stop.is_set():
            i += 1
            claim = self.pauses[(worker * 7 + i) % len(self.pauses)] if i % 3 == 0 else None
            try:
                if claim is None:
                    self.attempted[worker].add(i)
                    response = session.post(
                        f"{self.url}/api/context/push/",
                        json={"scope": "load", "name": f"list-{worker}", "value": i},
                        timeout=30,
                    )
                else:
                    response = session.post(f"{self.url}/api/pauses/claim/", json=claim, timeout=30)
            except requests.RequestException as error:
                with self.lock:
                    self.failures += 1
                    self.statuses[type(error).__name__] += 1
                time.sleep(0.01)
                continue
            with self.lock:
                self.statuses[response.status_code] += 1
                if response.status_code not in self.EXPECTED:
                    self.unexpected.append(f"{response.status_code} {response.text[:300]}")
                if response.status_code == 200:
                    self.successes += 1
                    if claim is None:
                        self.acked[worker].append(i)
                    else:
                        self.claims_won[claim["tool_call_id"]] += 1
                else:
                    self.failures += 1
            if response.status_code == 503:
                time.sleep(0.01)

    def __enter__(self) -> "Load":
        self.threads = [
            threading.Thread(target=self._worker, args=(w,)) for w in range(self.workers)
        ]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)

    def check_pushes(self, session: requests.Session) -> dict[str, int]:
        """No acknowledged push lost, none stored twice, nothing stored that was never
        sent, the order kept: the figures (sent, acknowledged, stored, lost, doubled)."""
        stored = session.get(
            f"{self.url}/api/context/", params={"scope": "load"}, timeout=30
        ).json()["values"]
        counts = dict.fromkeys(("sent", "acknowledged", "stored", "lost", "doubled"), 0)
        for worker, acked in self.acked.items():
            values = stored[f"list-{worker}"]
            counts["sent"] += len(self.attempted[worker])
            counts["acknowledged"] += len(acked)
            counts["stored"] += len(values)
            counts["lost"] += len(set(acked) - set(values))
            counts["doubled"] += len(values) - len(set(values))
            assert len(values) == len(set(values)), f"worker {worker}: a push stored twice"
            assert set(acked) <= set(values), f"worker {worker}: acknowledged pushes lost"
            assert set(values) <= self.attempted[worker], (
                f"worker {worker}: a push never sent was stored"
            )
            assert [v for v in values if v in set(acked)] == acked, (
                f"worker {worker}: order changed"
            )
        return counts

    def wait(self, condition, what: str, limit: float = 120) -> float:
        """Seconds until ``condition()``; a hang guard, not a speed assertion."""
        started = time.monotonic()
        while not condition():
            assert time.monotonic() - started < limit, (
                f"gave up waiting for {what}: {self.statuses}"
            )
            time.sleep(0.05)
        return time.monotonic() - started


@pytest.mark.postgres_only
def test_postgresql_restart_under_load_loses_no_acknowledged_write_and_claims_no_pause_twice(
    cluster,
):
    env = {**database_env(), "DATABASE_URL": cluster.url}
    _manage(env, "migrate", "-v0")
    token = (
        _manage(
            env,
            "shell",
            "-c",
            (
                "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token;"
                "u = User.objects.create_user('agent'); print(Token.objects.create(user=u).key)"
            ),
        )
        .strip()
        .splitlines()[-1]
    )

    with LiveServer(env, workers=2, threads=8) as server:
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token}"
        pauses = []
        for n in range(400):
            created = session.post(
                f"{server.url}/api/pauses/",
                json={
                    "chat_id": "restart",
                    "tool_call_id": f"call-{n}",
                    "owner": "agent",
                    "payload": {"n": n},
                },
                timeout=30,
            )
            assert created.status_code == 201, created.text
            pauses.append(
                {
                    "chat_id": "restart",
                    "tool_call_id": f"call-{n}",
                    "question_id": created.json()["question_id"],
                }
            )

        with Load(server.url, token, pauses) as load:
            load.wait(lambda: load.successes >= 200, "load before the stop")
            cluster.stop()
            failures_at_stop = load.failures
            load.wait(
                lambda: load.failures >= failures_at_stop + 20,
                "requests failing while the database is down",
            )
            successes_while_down = load.successes
            cluster.start()
            recovered_in = load.wait(
                lambda: load.successes > successes_while_down, "the first success after the restart"
            )
            load.wait(
                lambda: load.successes >= successes_while_down + 200, "load after the restart"
            )
        print(
            f"statuses under load: {dict(load.statuses)}; pushes acknowledged: "
            f"{sum(map(len, load.acked.values()))}; pauses claimed: {len(load.claims_won)}/{len(pauses)}; "
            f"answering again {recovered_in:.2f}s after the restart"
        )
        server_log = server.output()

        assert not load.unexpected, load.unexpected[:5]
        assert load.statuses[503] > 0, "the outage was never seen by a client"
        assert "Traceback" not in server_log, server_log

        load.check_pushes(session)

        # No pause claimed twice; every acknowledged claim is stored.
        assert all(count == 1 for count in load.claims_won.values()), load.claims_won
        listed = session.get(
            f"{server.url}/api/pauses/", params={"chat_id": "restart", "page_size": 500}, timeout=30
        ).json()["results"]
        status_of = {row["tool_call_id"]: row["status"] for row in listed}
        assert all(status_of[call] == "claimed" for call in load.claims_won), status_of
        for pause in pauses:  # a claim lost with its response is still one claim
            again = session.post(f"{server.url}/api/pauses/claim/", json=pause, timeout=30)
            won_before = pause["tool_call_id"] in load.claims_won
            assert again.status_code == (
                409 if status_of[pause["tool_call_id"]] == "claimed" else 200
            ), again.text
            assert not (won_before and again.status_code == 200)
