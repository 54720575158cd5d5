#!/usr/bin/env bash
# Run every check: the lock and requirements.txt agree, ruff, migrations,
# the documentation (mkdocs --strict), mypy, the layers (lint-imports) and the
# test suite. The suite runs on SQLite by default, on PostgreSQL when
# DATABASE_URL is set; Celery's test uses Redis when REDIS_URL is set. Extra arguments go to pytest
# (scripts/test.sh -k claim -x).
#
#   scripts/test.sh               # every check; the suite on one worker a core (at most 4)
#   scripts/test.sh --fast        # the suite less its slow tests (-m "not slow"), no other check
#   scripts/test.sh -n 0 tests/api   # pytest's own -n wins: one process
SYNC="--all-extras --group test --group lint --group docs"
VENV_NAME=.venv
source "$(dirname "$0")/bootstrap.sh"
FAST=
if [ "${1:-}" = --fast ]; then
  FAST=1
  shift
fi
# pytest-xdist: each worker has a database of its own (pytest-django's suffix
# _gw0, _gw1... on the name) and a Redis database of its own (tests/conftest.py).
WORKERS=(-n auto --maxprocesses 4 --dist loadgroup)

echo "==> database: ${DATABASE_URL:-SQLite file}; broker: ${REDIS_URL:-file system}"
if [ -n "$FAST" ]; then
  exec python -m pytest "${WORKERS[@]}" -m "not slow" "$@"
fi

# The admin's browser test drives Debian's headless Chromium, never a browser
# downloaded by Playwright.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing Chromium for the browser test"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "The browser test needs Chromium at /usr/bin/chromium: run" >&2
    echo "    sudo apt-get install chromium" >&2
    exit 1
  fi
fi

# The quick checks first: the first failure stops the command.
scripts/lock.sh --check
ruff check --quiet .
ruff format --check --quiet .
DJANGO_SETTINGS_MODULE=tests.settings python -m django makemigrations --check --dry-run agentstate

# The documentation, mypy and the layers (lint-imports) take a minute: they run beside the suite, their
# output held back until it ends, and fail the command as they would before it.
CHECKS="$(mktemp -d)"
(
  NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet --site-dir "$CHECKS/site"
  mypy
  lint-imports --no-cache
) >"$CHECKS/log" 2>&1 &
CHECKS_PID=$!
# kill fails when the checks have already ended: that must not fail the command (set -e).
trap 'kill "$CHECKS_PID" 2>/dev/null || true; rm -rf "$CHECKS"' EXIT
status=0
python -m pytest "${WORKERS[@]}" "$@" || status=$?
if wait "$CHECKS_PID"; then
  cat "$CHECKS/log"
else
  echo "==> the documentation (mkdocs build --strict) or mypy failed:" >&2
  cat "$CHECKS/log" >&2
  status=1
fi
exit "$status"
