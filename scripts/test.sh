#!/usr/bin/env bash
# Run every check: the lock and requirements.txt agree, ruff, migrations,
# the documentation (mkdocs --strict), mypy and the test suite. The suite runs
# on SQLite by default, on PostgreSQL when DATABASE_URL is set; Celery's test
# uses Redis when REDIS_URL is set. Extra arguments go to pytest
# (scripts/test.sh -k claim -x).
SYNC="--all-extras --group test --group lint --group docs"
VENV_NAME=.venv
source "$(dirname "$0")/bootstrap.sh"

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

echo "==> database: ${DATABASE_URL:-SQLite file}; broker: ${REDIS_URL:-file system}"
scripts/lock.sh --check
ruff check --quiet .
ruff format --check --quiet .
DJANGO_SETTINGS_MODULE=tests.settings python -m django makemigrations --check --dry-run agentstate
SITE="$(mktemp -d)"
NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet --site-dir "$SITE"
rm -rf "$SITE"
mypy
exec python -m pytest "$@"
