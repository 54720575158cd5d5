"""Helpers of the hardening tests: the API map read from the OpenAPI schema,
sample bodies built from it, row counts, and a live server in a subprocess.

Driving the tests from ``/api/schema/`` means an endpoint added later is
covered by the bad-input and access tests without editing them.
"""

import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from django.apps import apps
from django.db import connection
from django.test import Client

from project.database import url_of

ROOT = Path(__file__).resolve().parent.parent
WRITE_METHODS = ("post", "put", "patch", "delete")


@functools.cache
def api_schema() -> dict:
    response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200, response.content[:500]
    return json.loads(response.content)


def resolve(node: dict) -> dict:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = api_schema()["components"]["schemas"][name]
    return node


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    spec: dict

    @property
    def id(self) -> str:
        return f"{self.method.upper()} {self.path}"

    @property
    def body_schema(self) -> dict | None:
        content = self.spec.get("requestBody", {}).get("content", {})
        media = content.get("application/json")
        return resolve(media["schema"]) if media else None

    def parameters(self, where: str) -> list[dict]:
        return [p for p in self.spec.get("parameters", []) if p["in"] == where]


def operations() -> list[Operation]:
    return [
        Operation(method, path, spec)
        for path, item in sorted(api_schema()["paths"].items())
        for method, spec in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]


def write_operations() -> list[Operation]:
    return [op for op in operations() if op.method in WRITE_METHODS]


def body_operations() -> list[Operation]:
    return [op for op in write_operations() if op.body_schema is not None]


def sample(node: dict) -> Any:
    """A value of the schema ``node``: the smallest one it allows."""
    node = resolve(node)
    if "allOf" in node:
        return sample(node["allOf"][0])
    if "oneOf" in node or "anyOf" in node:
        return sample((node.get("oneOf") or node["anyOf"])[0])
    if "enum" in node:
        return next(value for value in node["enum"] if value is not None)
    kind = node.get("type")
    if kind == "string":
        if node.get("format") == "uuid":
            return str(uuid.uuid4())
        return "x" * max(1, node.get("minLength", 1))
    if kind == "integer":
        return node.get("minimum", 1)
    if kind == "number":
        return node.get("minimum", 1.5)
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return {name: sample(node["properties"][name]) for name in node.get("required", [])}
    return 1  # any JSON value


def sample_body(schema: dict) -> dict:
    """Only the required fields, each at its smallest valid value."""
    return {name: sample(schema["properties"][name]) for name in schema.get("required", [])}


def fill_path(path: str, values: dict[str, Any]) -> str:
    """``/api/runs/{run_id}/`` with the test's objects put in."""
    for name in [part[1:-1] for part in path.split("/") if part.startswith("{")]:
        assert name in values, f"no sample for path parameter {name!r}: add one to the test's world"
        path = path.replace(f"{{{name}}}", str(values[name]))
    return path


def row_counts() -> dict[str, int]:
    """Rows of every agentstate model (and users), to prove a refusal stored nothing."""
    counts = {
        m._meta.label: m._default_manager.count()
        for m in apps.get_app_config("agentstate").get_models()
    }
    counts["users"] = apps.get_model("auth", "User")._default_manager.count()
    return counts


# A live server in a subprocess


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_env(settings_dict: dict | None = None) -> dict[str, str]:
    """Environment that points the demo site at the database the tests use."""
    settings_dict = settings_dict or connection.settings_dict
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SQLITE_PATH")}
    if settings_dict["ENGINE"].endswith("sqlite3"):
        env["SQLITE_PATH"] = str(settings_dict["NAME"])
    else:
        env["DATABASE_URL"] = url_of(settings_dict)
    env["DJANGO_DEBUG"] = "0"
    # the demo site's var/ folder, should the server run on its settings
    env["AGENTSTATE_VAR_DIR"] = tempfile.mkdtemp(prefix="agentstate-site-")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Server:
    """A server of the demo site in a subprocess on a free port, started and stopped
    as a context manager: ready once it answers the schema. A subclass names it
    (``name``) and gives its ``command()``."""

    name = "the server"

    def __init__(self, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = env
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def __enter__(self) -> Self:
        # in the temporary folder: a test writes nothing into the checkout
        command = self.command()
        self.log = tempfile.TemporaryFile(prefix=f"{command[0]}-{self.port}-")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", *command],
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
        raise AssertionError(f"{self.name} did not start:\n" + self.output())

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-5000:]

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class LiveServer(Server):
    """gunicorn serving the demo site on a free port, as production would."""

    name = "the live server"

    def __init__(self, env: dict[str, str], workers: int = 2, threads: int = 4) -> None:
        super().__init__(env)
        self.workers, self.threads = workers, threads

    def command(self) -> list[str]:
        return [
            "gunicorn",
            "project.wsgi:application",
            "--bind",
            f"127.0.0.1:{self.port}",
            "--workers",
            str(self.workers),
            "--threads",
            str(self.threads),
            "--timeout",
            "60",
            "--graceful-timeout",
            "5",
        ]
