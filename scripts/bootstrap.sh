# Sourced by demo.sh and test.sh: a virtual environment with the dependencies
# locked in uv.lock, installed by uv (itself installed from PyPI into
# .venv-uv/ on first use). The caller sets SYNC to the extras and groups it
# needs and VENV_NAME to an environment of its own (test.sh .venv, demo.sh
# .venv-demo), so that each command runs beside the other in one checkout:
# every install is exactly what the lock says for that command, and changes
# no other command's environment.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
UV_VERSION=0.13.8
# AGENTSTATE_DJANGO=6.1.3 swaps the locked Django for that release in a
# virtual environment of its own (Django 6 needs Python 3.12 or newer).
DJANGO="${AGENTSTATE_DJANGO:-}"
VENV="$ROOT/${VENV_NAME:-.venv}${DJANGO:+-django-$DJANGO}"
MIN_MINOR=11
[ -z "$DJANGO" ] || [ "${DJANGO%%.*}" -lt 6 ] || MIN_MINOR=12

pick_python() {
  # pyenv's interpreters count even when its shims do not expose them. The
  # interpreter's own path, never a shim's: uv replaces (deletes and makes
  # anew) an environment made by another path than the one it is given.
  for candidate in python3.13 python3.12 python3.11 python3 \
    "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[1-9]*/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c "import sys; sys.exit(sys.version_info < (3, $MIN_MINOR))" 2>/dev/null; then
      "$candidate" -c "import os, sys; print(os.path.realpath(sys.executable))"
      return
    fi
  done
  echo "agentstate needs Python 3.$MIN_MINOR or newer here; none was found on PATH." >&2
  exit 1
}

PY="$(pick_python)"
UV="$ROOT/.venv-uv/bin/uv"
uv_ready() { [ "$("$UV" --version 2>/dev/null | cut -d' ' -f2)" = "$UV_VERSION" ]; }
# Two commands started at once install uv once: the second waits for the first.
if ! uv_ready && command -v flock >/dev/null 2>&1; then
  exec 9>"$ROOT/.venv-uv.lock"
  flock 9
fi
if ! uv_ready; then
  echo "==> installing uv $UV_VERSION into .venv-uv/"
  rm -rf "$ROOT/.venv-uv"
  if ! "$PY" -m venv "$ROOT/.venv-uv" 2>/dev/null; then
    rm -rf "$ROOT/.venv-uv"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "==> installing Debian's venv support for $PY"
      apt-get update -qq && apt-get install -y -qq "$(basename "$PY")-venv" python3-venv >/dev/null ||
        apt-get install -y -qq python3-venv >/dev/null
      "$PY" -m venv "$ROOT/.venv-uv"
    else
      echo "Cannot create a virtual environment: install your distribution's python3-venv package." >&2
      exit 1
    fi
  fi
  "$ROOT/.venv-uv/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
exec 9>&- # the lock, if taken, is released

# mysqlclient (the mysql extra, and the test and bench groups) is built from
# source against the MariaDB client library: Debian's libmariadb-dev and
# pkg-config, installed here when missing, as test.sh installs Chromium.
case " ${SYNC:-} " in
*" --all-extras "* | *" mysql "* | *" test "* | *" bench "*)
  if ! { command -v pkg-config >/dev/null 2>&1 &&
    { pkg-config --exists libmariadb || pkg-config --exists mysqlclient; }; }; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "==> installing the MariaDB client library's headers to build mysqlclient"
      apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libmariadb-dev pkg-config >/dev/null
    else
      echo "Building mysqlclient needs the MariaDB client library's headers: run" >&2
      echo "    sudo apt-get install libmariadb-dev pkg-config" >&2
      exit 1
    fi
  fi
  ;;
esac

# uv makes and fills the environment with the interpreter picked above, and
# never downloads one of its own.
export UV_PROJECT_ENVIRONMENT="$VENV" UV_PYTHON="$PY" UV_PYTHON_DOWNLOADS=never
# Installed compiled: every process the suite starts (servers, workers, probes)
# imports the packages from bytecode, also under PYTHONDONTWRITEBYTECODE.
# .bytecode marks an environment installed so (an older one is synced again).
export UV_COMPILE_BYTECODE=1
# shellcheck disable=SC2086  # SYNC is a list of options
if [ ! -e "$VENV/.bytecode" ] ||
  ! "$UV" sync --locked --check --quiet ${SYNC:-} ${DJANGO:+--no-install-package django} 2>/dev/null; then
  echo "==> installing the locked dependencies into ${VENV#"$ROOT"/}${DJANGO:+, with Django $DJANGO}"
  # shellcheck disable=SC2086
  "$UV" sync --locked --quiet ${SYNC:-} ${DJANGO:+--no-install-package django}
  touch "$VENV/.bytecode"
fi
if [ -n "$DJANGO" ] && [ "$("$VENV/bin/python" -c 'import django; print(django.__version__)' 2>/dev/null)" != "$DJANGO" ]; then
  "$UV" pip install --quiet --python "$VENV/bin/python" "Django==$DJANGO"
fi
export PATH="$VENV/bin:$PATH"
