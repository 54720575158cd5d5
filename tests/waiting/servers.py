"""uvicorn serving the demo site (``project.asgi``) on the test database, and
helpers to call it: the servers every waiting test talks to."""

import json
import urllib.error
import urllib.request
from typing import Any

from tests.hardening import ROOT, Server, database_env


class Uvicorn(Server):
    """One uvicorn process (one event loop) serving ``project.asgi:application``."""

    name = "uvicorn"

    def __init__(self, env: dict[str, str] | None = None, **extra: str) -> None:
        super().__init__({**(env or database_env()), **extra})
        self.env["DJANGO_SETTINGS_MODULE"] = "project.settings"  # the demo site, as deployed
        self.env["PYTHONPATH"] = str(ROOT)

    def command(self) -> list[str]:
        return [
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
        ]


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
