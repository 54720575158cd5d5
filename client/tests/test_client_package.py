"""agentstate-client is its own distribution: httpx only, no Django, the services' error names."""

import subprocess
import sys
import tomllib
from pathlib import Path

import agentstate_client
from agentstate import exceptions as services

CLIENT = Path(__file__).resolve().parent.parent

WITHOUT_DJANGO = """
import importlib.abc, sys

class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"django", "agentstate", "rest_framework"}:
            raise ModuleNotFoundError(name, name=name)

sys.meta_path.insert(0, Hide())
import agentstate_client
api = agentstate_client.AgentStateClient("http://127.0.0.1:9/api/", token="t", retries=0)
try:
    api.get("s")
except agentstate_client.Unreachable as error:
    print("unreachable", error.status)
print(sorted(m for m in sys.modules if m.split(".")[0] in {"django", "agentstate"}))
"""


def test_the_client_imports_and_works_without_django():
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_DJANGO],
        cwd=CLIENT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["unreachable 0", "[]"]


def test_the_distribution_requires_httpx_alone():
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "agentstate-client"
    assert [dependency.split(">")[0] for dependency in project["dependencies"]] == ["httpx"]
    assert "optional-dependencies" not in project


def test_every_service_refusal_has_a_client_error_of_its_name_and_code():
    refusals = [
        cls
        for cls in vars(services).values()
        if isinstance(cls, type)
        and issubclass(cls, services.AgentStateError)
        and cls is not services.AgentStateError
        and not (issubclass(cls, services.BadInput) and cls is not services.BadInput)
    ]
    assert len(refusals) > 15
    for refusal in refusals:
        mirror = getattr(agentstate_client, refusal.__name__)
        assert issubclass(mirror, agentstate_client.APIError)
        assert (mirror.status, mirror.code) == (refusal.status, refusal.code), refusal
