#!/usr/bin/env bash
# Run the whole test suite: on SQLite by default, on PostgreSQL when
# DATABASE_URL is set; Celery's test uses Redis when REDIS_URL is set.
# Extra arguments go to pytest (scripts/test.sh -k claim -x).
source "$(dirname "$0")/bootstrap.sh"
echo "==> database: ${DATABASE_URL:-SQLite file}; broker: ${REDIS_URL:-file system}"
ruff check --quiet .
ruff format --check --quiet .
python manage.py makemigrations --check --dry-run agentstate
exec python -m pytest "$@"
