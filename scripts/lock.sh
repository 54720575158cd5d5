#!/usr/bin/env bash
# After changing a dependency in pyproject.toml (or client/pyproject.toml):
# update uv.lock and export requirements.txt, the demo site's pins, from it.
#
#   scripts/lock.sh            # re-lock, keeping every other pin; rewrite requirements.txt
#   scripts/lock.sh --check    # fail if either is out of date (scripts/test.sh runs this)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
UV="${UV:-$ROOT/.venv-uv/bin/uv}"
[ -x "$UV" ] || { echo "uv is installed by scripts/test.sh or scripts/demo.sh first" >&2; exit 1; }
export UV_PYTHON_DOWNLOADS=never
# The demo site: the app with its api, celery and postgres extras, and the demo group.
EXPORT=(export --quiet --format requirements.txt --no-hashes --no-annotate --no-header
  --no-default-groups --group demo --extra api --extra celery --extra postgres --frozen)
HEADER="# The demo site's pinned requirements (pip install -r requirements.txt runs it),
# exported from uv.lock by scripts/lock.sh: edit pyproject.toml, not this file."
exported() { echo "$HEADER"; "$UV" "${EXPORT[@]}"; }
if [ "${1:-}" = "--check" ]; then
  "$UV" lock --check --quiet
  exported | diff -u requirements.txt - >&2 ||
    { echo "requirements.txt is not what uv.lock exports: run scripts/lock.sh" >&2; exit 1; }
else
  "$UV" lock
  exported >requirements.txt
fi
