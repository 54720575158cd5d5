"""The OpenAPI schema fuzzed against a live server: no 5xx, and every
response matching the schema (docs/rest-api.md: nothing malformed causes a 5xx).

schemathesis runs its coverage, fuzzing and stateful phases over
``/api/schema/`` against gunicorn serving the demo site on the database the
suite uses (SQLite, then PostgreSQL in CI), authenticated as a superuser
with a token so every endpoint's logic is reached. The run is bounded by
``AGENTSTATE_FUZZ_EXAMPLES`` cases per operation (default 50) and a fixed
seed (``AGENTSTATE_FUZZ_SEED``), so CI is repeatable; raise both locally to
search wider.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from tests.hardening import LiveServer, database_env

EXAMPLES = os.environ.get("AGENTSTATE_FUZZ_EXAMPLES", "50")
SEED = os.environ.get("AGENTSTATE_FUZZ_SEED", "20240605")


@pytest.mark.django_db(transaction=True)
def test_fuzzing_the_schema_finds_no_server_error_and_no_schema_mismatch(
    django_user_model, tmp_path
):
    user = django_user_model.objects.create(username="fuzzer", is_staff=True, is_superuser=True)
    token = Token.objects.create(user=user).key
    st = Path(sys.executable).with_name("st")
    with LiveServer(database_env(), workers=2, threads=4) as server:
        result = subprocess.run(
            [
                str(st),
                "run",
                f"{server.url}/api/schema/?format=json",
                "--header",
                f"Authorization: Token {token}",
                "--checks",
                "not_a_server_error,response_schema_conformance",
                "--max-examples",
                EXAMPLES,
                "--seed",
                SEED,
                "--workers",
                "1",
                "--request-timeout",
                "75",  # above MAX_WAIT, should a long wait get past tests/fuzz_waits.py
                # A stream without end (tests/waiting/test_stream.py covers it).
                "--exclude-path",
                "/api/events/stream/",
                "--no-color",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,
            env={
                **os.environ,
                "SCHEMATHESIS_HOOKS": "tests.fuzz_waits",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
                "NO_COLOR": "1",
            },
        )
        server_log = server.output()
    output = result.stdout + result.stderr
    (tmp_path / "fuzz-output.txt").write_text(output)
    cases = re.search(r"(\d+) generated", output)
    print(f"fuzz cases run: {cases.group(1) if cases else 'unknown'} (seed {SEED})")
    print(output[-3000:])
    assert result.returncode == 0, output[-20000:] + "\n--- server log ---\n" + server_log
    assert cases and int(cases.group(1)) > 0, output
    assert "Internal Server Error" not in server_log and "Traceback" not in server_log, server_log


# The operations whose every schema-valid request the server must accept (or
# refuse for the state it finds: 404, 409, 410, 412). The others hold a rule
# OpenAPI 3.0 cannot state (a field given only with another, a time in the
# future, an object's keys as tool names), see docs/rest-api.md.
ACCEPTING = (
    "^/api/(context/|context/list/|context/push/|context/pop/|scopes/"
    "|pauses/|pauses/claim/|pauses/resolve/|pauses/cancel/"
    "|webhooks/|users/[^/]+/budget/|runs/|runs/[^/]+/|runs/[^/]+/usage/|runs/[^/]+/budget/"
    "|runs/[^/]+/approvals/approve/|runs/[^/]+/approvals/reject/"
    "|runs/[^/]+/approval-requests/|approval-requests/)$"
)
CONFIG = """
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "401", "403", "404", "409", "410", "412"]
"""


@pytest.mark.django_db(transaction=True)
def test_every_schema_valid_request_is_accepted(django_user_model, tmp_path):
    """A client generated from the schema sends requests the server takes: a request
    valid by the schema is never refused as bad input (400)."""
    user = django_user_model.objects.create(username="fuzzer", is_staff=True, is_superuser=True)
    token = Token.objects.create(user=user).key
    st = Path(sys.executable).with_name("st")
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    root = Path(__file__).resolve().parents[2]
    with LiveServer(database_env(), workers=1, threads=2) as server:
        result = subprocess.run(
            [
                str(st),
                "run",
                f"{server.url}/api/schema/?format=json",
                "--header",
                f"Authorization: Token {token}",
                "--checks",
                "positive_data_acceptance,not_a_server_error",
                "--mode",
                "positive",
                # The fuzzing phase: the hooks (tests/fuzz_hooks.py) apply to it.
                "--phases",
                "fuzzing",
                "--include-path-regex",
                ACCEPTING,
                "--max-examples",
                "20",
                "--generation-deterministic",
                # JSON text is Unicode: no unpaired surrogate (the schema states U+0000).
                "--generation-codec",
                "utf-8",
                "--generation-allow-x00",
                "false",
                "--workers",
                "1",
                "--no-color",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            env={
                **os.environ,
                "SCHEMATHESIS_HOOKS": "tests.fuzz_hooks",
                "PYTHONPATH": str(root),
                "NO_COLOR": "1",
            },
        )
        server_log = server.output()
    output = result.stdout + result.stderr
    cases = re.search(r"(\d+) generated", output)
    print(f"positive cases run: {cases.group(1) if cases else 'unknown'}")
    assert result.returncode == 0, output[-20000:] + "\n--- server log ---\n" + server_log
    assert cases and int(cases.group(1)) > 100, output
