"""The processes the fault tests own: a Redis server on a private port, Celery
workers and beat of the demo site, and figures printed for docs/reliability.md."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.concurrency.test_pauses_processes import ROOT, site_env, stop
from tests.hardening import free_port


def wait_until(condition, what: str, seconds: float = 120, processes=()) -> float:
    """Seconds until ``condition()``: a hang guard, never a speed assertion."""
    started = time.monotonic()
    while not condition():
        for process in processes:
            assert process.poll() is None, f"{process.name} died: {process.log_tail()}"
        assert time.monotonic() - started < seconds, f"gave up waiting for {what}"
        time.sleep(0.1)
    return time.monotonic() - started


class RedisServer:
    """A redis-server of the test's own on a free port, no persistence: a restart
    starts it empty."""

    def __init__(self, folder: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed (apt-get install redis-server)")
        self.binary, self.folder, self.port = binary, folder, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
            + ["--appendonly", "no", "--dir", str(self.folder), "--daemonize", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self.answers, "redis-server to answer", 30)

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """Killed hard: every queued message is gone with it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None


class Celery:
    """``celery -A project worker`` (or ``beat``) of the demo site in its own process
    group, logging to a file of the test's folder."""

    def __init__(self, tmp_path: Path, name: str, env: dict[str, str], *command: str) -> None:
        self.name = name
        self.log = tmp_path / f"{name}.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "project", *command],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.log, "w"),  # noqa: SIM115 - the child holds it
            start_new_session=True,  # its own process group: the pool's children with it
        )
        self.pid = self.process.pid

    def poll(self):
        return self.process.poll()

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def kill(self) -> None:
        """SIGKILL to the worker and its pool: no chance to acknowledge or record."""
        if self.process.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.process.wait(10)


def worker_env(tmp_path: Path, broker_url: str, **extra: str) -> dict[str, str]:
    """The demo site with the bridged mailer on the test database and ``broker_url``;
    beat sends what is due every second, never sweeps."""
    return site_env(
        tmp_path,
        DJANGO_SETTINGS_MODULE="tests.bridged_site",
        REDIS_URL=broker_url,
        AGENTSTATE_WEBHOOK_ALLOW_PRIVATE="1",
        AGENTSTATE_WEBHOOK_SECONDS="1",
        AGENTSTATE_RESUME_SECONDS="1",
        AGENTSTATE_SWEEP_SECONDS="3600",
        **extra,
    )


def start_worker(tmp_path: Path, name: str, env: dict[str, str]) -> Celery:
    hostname = f"{name}-{uuid.uuid4().hex[:8]}@%h"
    return Celery(
        tmp_path, name, env, "worker", "--concurrency", "1", "--loglevel", "INFO",
        "--hostname", hostname, "--without-gossip", "--without-mingle",
    )  # fmt: skip


def start_beat(tmp_path: Path, env: dict[str, str]) -> Celery:
    schedule = tmp_path / f"celerybeat-{uuid.uuid4().hex[:8]}"
    return Celery(tmp_path, "beat", env, "beat", "--loglevel", "INFO", "--schedule", str(schedule))


def figures(fault: str, **counts: object) -> None:
    """The run's figures, one line the docs' table copies (``pytest -s`` shows it)."""
    print(f"\nFIGURES {fault}: " + ", ".join(f"{k}={v}" for k, v in counts.items()), flush=True)


__all__ = ["ROOT", "stop"]
