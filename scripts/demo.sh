#!/usr/bin/env bash
# Set up and serve the demo site, with the expiry sweep running.
#
#   scripts/demo.sh          # http://127.0.0.1:8000/ (PORT=... to change)
#
# SQLite and Celery's file-system broker by default: no service needed.
# DATABASE_URL=postgres://... and REDIS_URL=redis://... switch to them.
# The admin user is "admin"; its password is DEMO_PASSWORD, or generated and
# printed on first run.
# The demo's own dependencies (what requirements.txt pins), in an environment
# of its own (.venv-demo/): scripts/test.sh's (.venv/) is never touched, so
# the two run side by side in one checkout.
SYNC="--extra api --extra celery --extra postgres --no-default-groups --group demo"
# MySQL and MariaDB (DATABASE_URL=mysql://...) through mysqlclient, the mysql extra.
case "${DATABASE_URL:-}" in mysql://*) SYNC="$SYNC --extra mysql" ;; esac
VENV_NAME=.venv-demo
source "$(dirname "$0")/bootstrap.sh"
PORT="${PORT:-8000}"

echo "==> migrating the database"
python manage.py migrate --noinput -v0
python manage.py demo_user

echo "==> starting a Celery worker with beat (sweep every ${AGENTSTATE_SWEEP_SECONDS:-60}s)"
celery -A project worker --beat --concurrency 1 --loglevel INFO \
  --schedule "${AGENTSTATE_VAR_DIR:-var}/celerybeat-schedule" >"${AGENTSTATE_VAR_DIR:-var}/celery.log" 2>&1 &
CELERY_PID=$!
trap 'kill $CELERY_PID 2>/dev/null || true; wait $CELERY_PID 2>/dev/null || true' EXIT INT TERM
echo "    worker log: ${AGENTSTATE_VAR_DIR:-var}/celery.log"

echo "==> serving on http://127.0.0.1:$PORT/  (API docs /api/docs/ and /api/redoc/, admin /admin/)"
# uvicorn (ASGI): long-polls and event streams wait without holding a thread.
uvicorn project.asgi:application --host 127.0.0.1 --port "$PORT" --log-level warning
