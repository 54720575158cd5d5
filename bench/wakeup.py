"""How long a waiter takes to wake after a decision: p50 and p99, with and without
LISTEN/NOTIFY.

uvicorn serves the demo site (``project.asgi``) on the database of
``DATABASE_URL`` (migrated first); a client long-polls a pending request
(``GET /api/approval-requests/{id}/?wait=30``) while another decides it through
the same server; the figure is the time from the decision's answer to the
waiter's. Run on PostgreSQL twice: woken by LISTEN/NOTIFY (``AGENTSTATE_LISTEN=1``)
and by the event-log poll every half second (``AGENTSTATE_LISTEN=0``, what other
databases use).

    DATABASE_URL=postgres://... python -m bench.wakeup [--rounds 40]
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from bench.env import ROOT


def _call(url: str, token: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        url + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def _token() -> str:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.contrib.auth.models import Permission, User
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    call_command("migrate", verbosity=0)
    user, _ = User.objects.get_or_create(username="bench-wakeup")
    user.user_permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
    return Token.objects.get_or_create(user=user)[0].key


def measure(token: str, listen: bool, rounds: int) -> list[float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "AGENTSTATE_LISTEN": "1" if listen else "0", "DJANGO_DEBUG": "0"}
    env["AGENTSTATE_VAR_DIR"] = tempfile.mkdtemp(prefix="bench-wakeup-")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "project.asgi:application",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/api/schema/?format=json", timeout=5).read()
                break
            except OSError:
                time.sleep(0.2)
        run_id = f"wakeup-{time.time_ns()}"
        _call(url, token, "/api/runs/", {"run_id": run_id})
        latencies = []
        for i in range(rounds):
            pk = _call(
                url,
                token,
                f"/api/runs/{run_id}/approval-requests/",
                {"tool_name": "t", "call_id": f"c{i}"},
            )["id"]
            woken: list[float] = []
            waiter = threading.Thread(
                target=lambda pk=pk, woken=woken: (
                    _call(url, token, f"/api/approval-requests/{pk}/?wait=30"),
                    woken.append(time.perf_counter()),
                )
            )
            waiter.start()
            time.sleep(0.3)  # the waiter waits
            _call(url, token, f"/api/approval-requests/{pk}/decide/", {"decision": "approve"})
            decided = time.perf_counter()
            waiter.join()
            latencies.append(woken[0] - decided)
        return latencies
    finally:
        server.terminate()
        server.wait(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    token = _token()
    print("wake-up after a decision (ms)      p50      p99")
    for listen in (True, False):
        found = sorted(measure(token, listen, args.rounds))
        p50 = statistics.median(found) * 1000
        p99 = found[min(len(found) - 1, int(len(found) * 0.99))] * 1000
        name = "LISTEN/NOTIFY" if listen else "event-log poll (0.5 s)"
        print(f"  {name:<30} {max(p50, 0):8.1f} {max(p99, 0):8.1f}")


if __name__ == "__main__":
    main()
