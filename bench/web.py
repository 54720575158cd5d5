"""REST endpoints under gunicorn, loaded by wrk (a C load generator) in another process.

gunicorn runs the demo site (``bench.site_settings``: the demo's settings,
its token authentication included, and URLs plus the baseline views of
``bench.site_urls``) with 2 x cores + 1 sync workers, gunicorn's own sizing
rule, and persistent database connections (``CONN_MAX_AGE``). wrk holds 8
connections from one thread. Each endpoint's figure follows its two
baselines, measured just before it: a bare DRF view authenticated by DRF's
``TokenAuthentication`` doing one UPDATE (writes) or SELECT (reads), the
floor, and a bare Django view without authentication doing the same, the
limit.

Two callers: the owner, a plain user without permissions who made the
scopes, runs and approval requests (``created_by``) and owns the pauses;
and a service account, a user holding the model permissions of
``SERVICE_PERMISSIONS``, acting on the owner's objects (naming the scope's
owner with ``owner``). Every endpoint is given requests that can all
succeed: 64 different variables, lists or runs in turn, or, where an
operation works once (claim, decide, create, filing), one prepared object
per request. A figure with any non-2xx response or socket error is flagged.
No webhook is active unless an endpoint says so (``webhook``): filing an
approval request is measured without one, like the Python API's figure, and
once more with one for ``approval.requested`` (each filing's delivery then
handed to the broker by a thread of the server process). Before that figure,
one second of filings with calls of their own warms the hand-off up: each
worker's thread started and connected to the broker, a cost each process pays
once (a tenth of a second or more, against a measurement of one to three).

Before the load, one request per endpoint through Django's test client in
this process counts its database queries and round trips (``bench.counts``).
"""

import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from agentstate.services import context
from bench import counts, fill
from bench.api_ops import TAG, subscribed
from bench.env import ROOT

SPREAD = 64  # distinct objects a repeatable request cycles through
CONNECTIONS = 8
SERVICE = "bench-service"
SERVICE_PERMISSIONS = (
    "view_scope",
    "change_scope",
    "view_run",
    "change_run",
    "view_pausedrun",
    "change_pausedrun",
    "add_pausedrun",
    "view_approvalrequest",
    "decide_approvalrequest",
)


@dataclass
class Endpoint:
    """``paths`` and ``bodies`` are taken in turn, each list cycling; the last of each
    (the only one, for a list of one) is kept for the request that counts queries."""

    name: str
    kind: str  # "write" or "read": compared with the baselines' UPDATE or SELECT
    method: str
    paths: list[str]
    bodies: list[dict] = field(default_factory=list)
    caller: str = "owner"  # or "service"
    webhook: bool = False  # measured with an active webhook for approval.requested

    def loaded(self) -> tuple[list[str], list[dict]]:
        """The paths and bodies for wrk."""
        return (
            self.paths[:-1] if len(self.paths) > 1 else self.paths,
            self.bodies[:-1] if len(self.bodies) > 1 else self.bodies,
        )

    def probe(self) -> tuple[str, dict | None]:
        return self.paths[-1], self.bodies[-1] if self.bodies else None


def _user(username: str, permissions: tuple[str, ...] = ()):
    """A plain, active user holding ``permissions`` (of agentstate) and no others; its token."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from rest_framework.authtoken.models import Token

    user, _ = get_user_model()._default_manager.update_or_create(
        username=username, defaults={"is_superuser": False, "is_staff": False, "is_active": True}
    )
    granted = list(
        Permission.objects.filter(content_type__app_label="agentstate", codename__in=permissions)
    )
    if len(granted) != len(permissions):
        missing = set(permissions) - {p.codename for p in granted}
        raise RuntimeError(f"no such permissions: {sorted(missing)}")
    user.user_permissions.set(granted)
    user.groups.clear()
    return user, Token.objects.get_or_create(user=user)[0].key


def users() -> dict[str, tuple]:
    """The callers: ``owner`` (named ``fill.OWNER``, the pauses' owner) and ``service``."""
    return {"owner": _user(fill.OWNER), "service": _user(SERVICE, SERVICE_PERMISSIONS)}


def endpoints(supply: int, owner) -> list[Endpoint]:
    """The measured endpoints with their prepared objects, made by ``owner``."""
    ks = range(SPREAD)
    scope = f"bench/{TAG}/http"
    for k in ks:
        context.put(scope, f"v{k}", {"step": 7}, owner=owner)
        fill.a_list(scope, f"l{k}", 10, owner=owner)
        fill.a_list(scope, f"r{k}", 10, owner=owner)  # read only
        fill.a_list(scope, f"p{k}", supply // SPREAD + 10, owner=owner)
    run_ids = [f"{TAG}-http-{k + 1}" for k in ks]  # fill.runs counts from 1
    fill.runs(f"{TAG}-http", SPREAD, created_by=owner)
    chat = f"{TAG}-http"
    fill.pauses(chat, supply + 1)
    queue = fill.approval_requests(
        fill.runs(f"{TAG}-http-decide", supply + 1, created_by=owner), created_by=owner
    )
    # VACUUM, as autovacuum would have run after the sections before filled their rows:
    # a page's count then reads its index alone (docs/performance.md, 2026-12-05).
    fill.analyze(vacuum=True)
    runs = [f"/api/runs/{run_id}/" for run_id in run_ids]
    with_list = [f"/api/context/?scope={scope}&name=v{k}&name=r{k}" for k in ks]

    def filing(caller: str, webhook: bool = False) -> Endpoint:
        label = ", webhook" if webhook else ""
        return Endpoint(
            f"POST approval request ({caller}{label})",
            "write",
            "POST",
            [f"{run}approval-requests/" for run in runs],
            [
                {
                    "tool_name": "mail",
                    "call_id": f"{caller}{label}-{n}",
                    "arguments": {"to": "a@b.c"},
                }
                for n in range(supply + 1)
            ],
            caller,
            webhook,
        )

    def checking(caller: str) -> Endpoint:
        return Endpoint(
            f"GET approvals ({caller})",
            "read",
            "GET",
            [f"{run}approvals/?tool_name=mail&call_id=call-1" for run in runs],
            caller=caller,
        )

    return [
        Endpoint(
            "GET context", "read", "GET", [f"/api/context/?scope={scope}&name=v{k}" for k in ks]
        ),
        Endpoint("GET context with list (owner)", "read", "GET", with_list),
        Endpoint(
            "GET context with list (service)",
            "read",
            "GET",
            [f"{path}&owner={fill.OWNER}" for path in with_list],
            caller="service",
        ),
        Endpoint(
            "PUT context",
            "write",
            "PUT",
            ["/api/context/"],
            [{"scope": scope, "name": f"v{k}", "value": {"step": 7}} for k in ks],
        ),
        Endpoint(
            "POST push",
            "write",
            "POST",
            ["/api/context/push/"],
            [{"scope": scope, "name": f"l{k}", "value": 7} for k in ks],
        ),
        Endpoint(
            "POST pop",
            "write",
            "POST",
            ["/api/context/pop/"],
            [{"scope": scope, "name": f"p{k}"} for k in ks],
        ),
        Endpoint(
            "POST pauses (put)",
            "write",
            "POST",
            ["/api/pauses/"],
            [
                {
                    "chat_id": f"{chat}-put",
                    "tool_call_id": f"call-{k}",
                    "owner": fill.OWNER,
                    "payload": {"step": 7},
                }
                for k in ks
            ],
        ),
        Endpoint(
            "POST claim",
            "write",
            "POST",
            ["/api/pauses/claim/"],
            [
                {"chat_id": chat, "tool_call_id": f"call-{n}", "question_id": str(fill.question(n))}
                for n in range(1, supply + 2)
            ],
        ),
        Endpoint(
            "GET pauses",
            "read",
            "GET",
            [f"/api/pauses/?chat_id={chat}&tool_call_id=call-{k + 1}" for k in ks],
        ),
        Endpoint(
            "GET pauses (page of 20)",
            "read",
            "GET",
            ["/api/pauses/?page_size=20"],
        ),
        Endpoint("GET events (page of 20)", "read", "GET", ["/api/events/?page_size=20"]),
        Endpoint(
            "POST runs",
            "write",
            "POST",
            ["/api/runs/"],
            [{"run_id": f"{TAG}-new-{n}"} for n in range(supply + 1)],
        ),
        Endpoint("GET run", "read", "GET", runs),
        Endpoint(
            "POST usage",
            "write",
            "POST",
            [f"{run}usage/" for run in runs],
            [{"input_tokens": 10, "output_tokens": 5}],
        ),
        checking("owner"),
        checking("service"),
        Endpoint(
            "POST approve",
            "write",
            "POST",
            [f"{run}approvals/approve/" for run in runs],
            [{"tool_name": "mail", "call_id": "call-1"}],
        ),
        filing("owner"),
        filing("service"),
        filing("owner", webhook=True),
        Endpoint(
            "POST decide (service)",
            "write",
            "POST",
            [f"/api/approval-requests/{pk}/decide/" for pk in queue],
            [{"decision": "approve"}],
            "service",
        ),
        Endpoint(
            "GET approval request",
            "read",
            "GET",
            [f"/api/approval-requests/{pk}/" for pk in queue[:SPREAD]],
        ),
        Endpoint(
            "GET approval requests (page of 20)",
            "read",
            "GET",
            ["/api/approval-requests/?status=pending&page_size=20"],
        ),
    ]


# The baselines by kind: the DRF floor (with the owner's token) and the bare Django view.
DRF = {
    "write": Endpoint("DRF UPDATE view", "write", "POST", ["/bench/drf/update/"], [{}]),
    "read": Endpoint("DRF SELECT view", "read", "GET", ["/bench/drf/select/"]),
}
BARE = {
    "write": Endpoint("bare UPDATE view", "write", "POST", ["/bench/update/"], [{}]),
    "read": Endpoint("bare SELECT view", "read", "GET", ["/bench/select/"]),
}


def _lua_list(items: list[str]) -> str:
    return "{" + ",".join(f"[==[{item}]==]" for item in items) + "}"


def lua_script(endpoint: Endpoint, token: str) -> str:
    """wrk's script: the n-th request takes the n-th path and body (cycling)."""
    paths, bodies = endpoint.loaded()
    bodies = [json.dumps(body) for body in bodies]
    return f"""wrk.method = "{endpoint.method}"
wrk.headers["Authorization"] = "Token {token}"
wrk.headers["Content-Type"] = "application/json"
local paths = {_lua_list(paths)}
local bodies = {_lua_list(bodies)}
local n = 0
request = function()
  n = n + 1
  local body = nil
  if #bodies > 0 then body = bodies[(n - 1) % #bodies + 1] end
  return wrk.format(nil, paths[(n - 1) % #paths + 1], nil, body)
end
"""


def wrk(base: str, endpoint: Endpoint, token: str, seconds: float) -> dict:
    """Requests per second, and the failed responses (non-2xx/3xx and socket errors)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        script.write(lua_script(endpoint, token))
        script.flush()
        out = subprocess.run(
            [
                "wrk",
                "--latency",
                "-t1",
                f"-c{CONNECTIONS}",
                f"-d{max(1, round(seconds))}s",
                "-s",
                script.name,
                base,
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p50_ms": _percentile(out, 50),
        "p99_ms": _percentile(out, 99),
        "failed": (int(non_2xx.group(1)) if non_2xx else 0)
        + (sum(map(int, errors.groups())) if errors else 0),
        "wrk": out if non_2xx or errors else "",  # kept for a look at what failed
    }


UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def _percentile(out: str, percent: int) -> float | None:
    """A request's latency at ``percent`` in wrk's ``--latency`` distribution, in ms."""
    found = re.search(rf"^\s+{percent}%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.M)
    return None if found is None else round(float(found.group(1)) * UNITS[found.group(2)], 3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """gunicorn serving ``bench.site_settings``, stopped on exit."""

    workers = 2 * (os.cpu_count() or 1) + 1

    def __enter__(self) -> str:
        port = _free_port()
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "bench.site_settings",
            "DJANGO_DEBUG": "0",
            "PYTHONPATH": str(ROOT),
        }
        self.process = subprocess.Popen(
            [
                str(ROOT / ".venv/bin/gunicorn"),
                "project.wsgi:application",
                "-w",
                str(self.workers),
                "-b",
                f"127.0.0.1:{port}",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{base}/bench/select/", timeout=1)
                return base
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("gunicorn did not start")

    def __exit__(self, *exc) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(30)


def probe(endpoint: Endpoint, token: str) -> dict:
    """One request through Django's test client in this process: its status, and its
    database queries and round trips (``bench.counts``)."""
    from django.test import Client
    from django.test.utils import override_settings

    path, body = endpoint.probe()
    client = Client(headers={"authorization": f"Token {token}"})
    with override_settings(ROOT_URLCONF="bench.site_urls"):
        figure = counts.of(
            lambda: client.generic(
                endpoint.method,
                path,
                json.dumps(body) if body is not None else "",
                content_type="application/json",
            )
        )
    response = figure["result"]
    return {
        "queries": figure["statements"],
        "round_trips": figure["round_trips"],
        "status": response.status_code,
        **({"listed": listed} if (listed := _listed(response)) is not None else {}),
    }


def _listed(response: Any) -> int | None:
    """A page's ``count``: the rows its listing counts at every request (an exact
    count, whose cost grows with them), or ``None`` for an answer that is no page."""
    if response.status_code != 200 or response.get("content-type") != "application/json":
        return None
    body = response.json()
    return body["count"] if isinstance(body, dict) and "results" in body else None


def warming(endpoint: Endpoint) -> Endpoint:
    """``endpoint`` with calls of its own (``warm-`` before each call id), to warm up
    the server on without using the measured calls."""
    return dataclasses.replace(
        endpoint,
        name=f"{endpoint.name}, warming up",
        bodies=[{**body, "call_id": f"warm-{body['call_id']}"} for body in endpoint.bodies],
    )


def measure(seconds: float, supply: int) -> dict:
    """Each endpoint's requests per second, failures and round trips, beside its
    baselines' (the DRF floor and the bare Django view) measured just before it."""
    callers = users()
    tokens = {caller: token for caller, (_, token) in callers.items()}
    measured = endpoints(supply, callers["owner"][0])
    owner = tokens["owner"]
    for warm_up in (*DRF.values(), *BARE.values(), measured[0]):
        probe(warm_up, owner)  # this process's one-time lookups: URLs, views, statements
    baselines = {
        baseline.name: probe(baseline, owner) for baseline in (*DRF.values(), *BARE.values())
    }
    probes = {}
    for endpoint in measured:
        subscribed(endpoint.webhook)
        probes[endpoint.name] = probe(endpoint, tokens[endpoint.caller])
    figures = {}
    with Server() as base:
        # warm up: every worker connected, agentstate's views imported and their first
        # requests served (GET context is repeatable)
        wrk(base, DRF["read"], owner, 1)
        wrk(base, measured[0], owner, 1)
        for endpoint in measured:
            subscribed(endpoint.webhook)
            if endpoint.webhook:
                # every worker's hand-off thread started and connected to the broker
                wrk(base, warming(endpoint), tokens[endpoint.caller], 1)
            bare = wrk(base, BARE[endpoint.kind], owner, seconds)
            drf = wrk(base, DRF[endpoint.kind], owner, seconds)  # the ratio's, just before
            figures[endpoint.name] = {
                "kind": endpoint.kind,
                "caller": endpoint.caller,
                **wrk(base, endpoint, tokens[endpoint.caller], seconds),
                "drf_rps": drf["rps"],
                "drf_p50_ms": drf["p50_ms"],
                "drf_p99_ms": drf["p99_ms"],
                "drf_failed": drf["failed"],
                "bare_rps": bare["rps"],
                "bare_failed": bare["failed"],
                **probes[endpoint.name],
            }
    return {"endpoints": figures, "baselines": baselines}
