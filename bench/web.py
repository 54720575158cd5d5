"""REST endpoints under gunicorn, loaded by wrk (a C load generator) in another process.

gunicorn runs the demo site (``bench.site_settings``: the demo's settings and
URLs plus two bare views) with 2 x cores + 1 sync workers, gunicorn's own
sizing rule, and persistent database connections (``CONN_MAX_AGE``). wrk
holds 8 connections from one thread. Every endpoint is given requests that
can all succeed: 64 different variables, lists, runs or pauses in turn, or,
where an operation works once (claim, decide, create), one prepared object
per request. A figure with any non-2xx response or socket error is flagged.
"""

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

from agentstate.services import context
from bench import fill
from bench.api_ops import TAG
from bench.env import ROOT

SPREAD = 64  # distinct objects a repeatable request cycles through
CONNECTIONS = 8


@dataclass
class Endpoint:
    name: str
    kind: str  # "write" or "read": compared with the bare UPDATE or SELECT view
    method: str
    paths: list[str]
    bodies: list[dict] = field(default_factory=list)


def _user_and_token():
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user, _ = get_user_model()._default_manager.get_or_create(
        username=fill.OWNER, defaults={"is_superuser": True, "is_staff": True}
    )
    return user, Token.objects.get_or_create(user=user)[0].key


def endpoints(supply: int) -> tuple[list[Endpoint], str]:
    """The measured endpoints with their prepared objects, and the token to call them with."""
    user, token = _user_and_token()
    ks = range(SPREAD)
    scope = f"bench/{TAG}/http"
    for k in ks:
        context.put(scope, f"v{k}", {"step": 7}, owner=user)
        fill.a_list(scope, f"l{k}", 10, owner=user)
        fill.a_list(scope, f"p{k}", supply // SPREAD + 10, owner=user)
    run_ids = [f"{TAG}-http-{k + 1}" for k in ks]  # fill.runs counts from 1
    fill.runs(f"{TAG}-http", SPREAD)
    chat = f"{TAG}-http"
    fill.pauses(chat, supply)
    queue = fill.approval_requests(fill.runs(f"{TAG}-http-decide", supply))
    fill.analyze()
    runs = [f"/api/runs/{run_id}/" for run_id in run_ids]
    measured = [
        Endpoint(
            "GET context", "read", "GET", [f"/api/context/?scope={scope}&name=v{k}" for k in ks]
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
                for n in range(1, supply + 1)
            ],
        ),
        Endpoint(
            "GET pauses",
            "read",
            "GET",
            [f"/api/pauses/?chat_id={chat}&tool_call_id=call-{k + 1}" for k in ks],
        ),
        Endpoint(
            "POST runs",
            "write",
            "POST",
            ["/api/runs/"],
            [{"run_id": f"{TAG}-new-{n}"} for n in range(supply)],
        ),
        Endpoint("GET run", "read", "GET", runs),
        Endpoint(
            "POST usage",
            "write",
            "POST",
            [f"{run}usage/" for run in runs],
            [{"input_tokens": 10, "output_tokens": 5}],
        ),
        Endpoint(
            "GET approvals",
            "read",
            "GET",
            [f"{run}approvals/?tool_name=mail&call_id=call-1" for run in runs],
        ),
        Endpoint(
            "POST approve",
            "write",
            "POST",
            [f"{run}approvals/approve/" for run in runs],
            [{"tool_name": "mail", "call_id": "call-1"}],
        ),
        Endpoint(
            "POST decide",
            "write",
            "POST",
            [f"/api/approval-requests/{pk}/decide/" for pk in queue],
            [{"decision": "approve"}],
        ),
        Endpoint(
            "GET approval request",
            "read",
            "GET",
            [f"/api/approval-requests/{pk}/" for pk in queue[:SPREAD]],
        ),
    ]
    return measured, token


BARE = [
    Endpoint("bare UPDATE view", "write", "POST", ["/bench/update/"], [{}]),
    Endpoint("bare SELECT view", "read", "GET", ["/bench/select/"]),
]


def _lua_list(items: list[str]) -> str:
    return "{" + ",".join(f"[==[{item}]==]" for item in items) + "}"


def lua_script(endpoint: Endpoint, token: str) -> str:
    """wrk's script: the n-th request takes the n-th path and body (cycling)."""
    bodies = [json.dumps(body) for body in endpoint.bodies]
    return f"""wrk.method = "{endpoint.method}"
wrk.headers["Authorization"] = "Token {token}"
wrk.headers["Content-Type"] = "application/json"
local paths = {_lua_list(endpoint.paths)}
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
        "failed": (int(non_2xx.group(1)) if non_2xx else 0)
        + (sum(map(int, errors.groups())) if errors else 0),
        "wrk": out if non_2xx or errors else "",  # kept for a look at what failed
    }


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


def measure(seconds: float, supply: int) -> dict[str, dict]:
    """Each endpoint's requests per second and failures, beside its bare view's measured just before."""
    measured, token = endpoints(supply)
    bare = {endpoint.kind: endpoint for endpoint in BARE}
    figures = {}
    with Server() as base:
        wrk(base, bare["read"], token, 1)  # warm up: every worker connected
        for endpoint in measured:
            baseline = wrk(base, bare[endpoint.kind], token, seconds)
            figures[endpoint.name] = {
                "kind": endpoint.kind,
                **wrk(base, endpoint, token, seconds),
                "bare_rps": baseline["rps"],
                "bare_failed": baseline["failed"],
            }
    return figures
