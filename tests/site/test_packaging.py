"""What a user's ``pip install`` brings, in new virtual environments from this checkout.

``pip install .`` must pull Django alone (the extras carry the rest) and ship
the PostgreSQL backend's SQL; ``pip install ./client`` must pull httpx alone and
import without Django.
"""

import json
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _environment(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True).create(path)
    return path / "bin" / "python"


def _installing(python: Path, target: Path) -> set[str]:
    """What ``pip install target`` added to the environment (pip's own tools aside)."""
    before = _installed(python)
    _pip(python, "install", "--quiet", str(target))
    return _installed(python) - before


def _pip(python: Path, *args: str) -> str:
    done = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _installed(python: Path) -> set[str]:
    listed = json.loads(_pip(python, "list", "--format=json"))
    return {package["name"].lower().replace("_", "-") for package in listed}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    python = _environment(tmp_path_factory.mktemp("site") / "venv")
    return python, _installing(python, ROOT)


def test_the_package_requires_django_alone(site):
    _, added = site
    assert added == {"django-agentstate", "django", "asgiref", "sqlparse"}


def test_the_package_ships_the_postgresql_functions_and_the_templates(site):
    """The current SQL and the migrations' frozen SQL files, every one."""
    folders = ["backends/postgresql/sql", "migrations/sql"]
    probe = (
        "import agentstate, pathlib; root = pathlib.Path(agentstate.__file__).parent;"
        f"[print(sorted(p.name for p in (root / f).glob('*.sql'))) for f in {folders!r}];"
        "print((root / 'py.typed').exists(), any((root / 'templates').rglob('*.html')))"
    )
    done = subprocess.run(
        [str(site[0]), "-c", probe], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert done.returncode == 0, done.stderr
    *sql, flags = done.stdout.splitlines()
    for folder, names in zip(folders, sql, strict=True):
        shipped = sorted(p.name for p in (ROOT / "agentstate" / folder).glob("*.sql"))
        assert shipped and json.loads(names.replace("'", '"')) == shipped, folder
    assert flags == "True True"


def test_the_client_requires_httpx_alone_and_imports_without_django(tmp_path):
    python = _environment(tmp_path / "venv")
    added = _installing(python, ROOT / "client")
    assert {"agentstate-client", "httpx"} <= added
    assert not _installed(python) & {"django", "django-agentstate", "djangorestframework"}
    done = subprocess.run(
        [str(python), "-c", "import agentstate_client; print(agentstate_client.__version__)"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the client names its version"
