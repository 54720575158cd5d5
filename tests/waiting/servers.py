"""uvicorn serving the demo site (``project.asgi``) on the test database, and
helpers to call it: the servers every waiting test talks to."""

import json
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any

from tests.hardening import ROOT, database_env, free_port


class Uvicorn:
    """One uvicorn process (one event loop) serving ``project.asgi:application``."""

    def __init__(self, env: dict[str, str] | None = None, **extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**(env or database_env()), **extra}
        self.env["DJANGO_SETTINGS_MODULE"] = "project.settings"  # the demo site, as deployed
        self.env["PYTHONPATH"] = str(ROOT)

    def __enter__(self) -> "Uvicorn":
        self.log = tempfile.TemporaryFile(prefix=f"uvicorn-{self.port}-")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "project.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                "--limit-concurrency",
                "2000",
                "--backlog",
                "2048",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            try:
                urllib.request.urlopen(self.url + "/api/schema/?format=json", timeout=5).read()
                return self
            except OSError:
                time.sleep(0.2)
        raise AssertionError("uvicorn did not start:\n" + self.output())

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-5000:]

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def call(
    base: str,
    token: str,
    path: str,
    body: Any = None,
    method: str | None = None,
    timeout: float = 90,
) -> tuple[int, Any]:
    request = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method=method or ("GET" if body is None else "POST"),
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")
