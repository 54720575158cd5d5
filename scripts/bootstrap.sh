# Sourced by demo.sh and test.sh: a virtual environment with the pinned
# requirements, made once and refreshed when requirements.txt changes.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# AGENTSTATE_DJANGO=6.1.3 swaps the pinned Django for that release in a
# virtual environment of its own (Django 6 needs Python 3.12 or newer).
DJANGO="${AGENTSTATE_DJANGO:-}"
VENV="${AGENTSTATE_VENV:-$ROOT/.venv${DJANGO:+-django-$DJANGO}}"
MIN_MINOR=11
[ -z "$DJANGO" ] || [ "${DJANGO%%.*}" -lt 6 ] || MIN_MINOR=12

pick_python() {
  # pyenv's interpreters count even when its shims do not expose them.
  for candidate in python3.13 python3.12 python3.11 python3 \
    "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[1-9]*/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c "import sys; sys.exit(sys.version_info < (3, $MIN_MINOR))" 2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
  echo "agentstate needs Python 3.$MIN_MINOR or newer here; none was found on PATH." >&2
  exit 1
}

if [ ! -x "$VENV/bin/python" ]; then
  PY="$(pick_python)"
  echo "==> creating a virtual environment in $VENV with $("$PY" --version)"
  if ! "$PY" -m venv "$VENV" 2>/dev/null; then
    rm -rf "$VENV"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "==> installing Debian's venv support for $PY"
      apt-get update -qq && apt-get install -y -qq "$(basename "$PY")-venv" python3-venv >/dev/null ||
        apt-get install -y -qq python3-venv >/dev/null
      "$PY" -m venv "$VENV"
    else
      echo "Cannot create a virtual environment: install your distribution's python3-venv package." >&2
      exit 1
    fi
  fi
fi

REQUIREMENTS="$VENV/requirements.txt"
sed "${DJANGO:+s/^Django==.*/Django==$DJANGO/}" requirements.txt >"$REQUIREMENTS.new"
STAMP="$VENV/.requirements.sha256"
WANT="$(sha256sum "$REQUIREMENTS.new" | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "==> installing the pinned requirements (requirements.txt${DJANGO:+, with Django $DJANGO})"
  mv "$REQUIREMENTS.new" "$REQUIREMENTS"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e .
  echo "$WANT" >"$STAMP"
fi
rm -f "$REQUIREMENTS.new"
export PATH="$VENV/bin:$PATH"
