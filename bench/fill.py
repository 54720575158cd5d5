"""Set-based fills: the rows a measurement consumes, made by one statement each.

``analyze()`` follows the fills, as autovacuum would soon after: a plan made
on statistics from before thousands of new rows (an index scan of every
pending pause, say) would measure the planner, not the code.
"""

import uuid

from django.db import connection

from agentstate.models import Scope, Variable

PAYLOAD = (
    '{"messages": ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbb"], "step": 7}'
)
OWNER = "bench"


def mysql() -> bool:
    """MySQL or MariaDB (MariaDB's sequence tables, ``seq_1_to_<n>``, make the rows)."""
    return connection.vendor == "mysql"


def analyze(vacuum: bool = False) -> None:
    """``vacuum``: on PostgreSQL, ``VACUUM ANALYZE``, as autovacuum does after as many
    inserts (``autovacuum_vacuum_insert_threshold``, PostgreSQL 13 and later): it sets
    the visibility map, without which an index-only scan reads the table's rows too
    (a listing's count). Where autovacuum is off (this machine's CI configuration),
    nothing else would."""
    with connection.cursor() as cursor:
        if mysql():
            cursor.execute(f"ANALYZE TABLE {', '.join(TABLES)}")
            cursor.fetchall()
        else:
            cursor.execute("VACUUM ANALYZE" if vacuum else "ANALYZE")


TABLES = (
    "agentstate_pausedrun",
    "agentstate_run",
    "agentstate_approvalrequest",
    "agentstate_element",
)


def question(i: int) -> uuid.UUID:
    """The question id of filled pause ``i`` (``lpad(to_hex(i), 32, '0')::uuid`` in SQL)."""
    return uuid.UUID(int=i)


def pauses(chat_id: str, count: int, *, expired: bool = False) -> None:
    """Pending pauses ``(chat_id, "call-<i>")`` for i in 1..count, owned by ``OWNER``."""
    if mysql():
        expires = "- INTERVAL 5 MINUTE" if expired else "+ INTERVAL 1 DAY"
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO agentstate_pausedrun (chat_id, tool_call_id, owner, question_id,"
                " status, payload, created_at, expires_at, claimed_by)"
                " SELECT %s, CONCAT('call-', seq), %s, CAST(LPAD(HEX(seq), 32, '0') AS UUID),"
                f" 'pending', %s, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) {expires}, ''"
                f" FROM seq_1_to_{int(count)}",
                [chat_id, OWNER, PAYLOAD],
            )
        return
    expires = "now() - interval '5 minutes'" if expired else "now() + interval '1 day'"
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO agentstate_pausedrun (chat_id, tool_call_id, owner, question_id, status,"
            " payload, created_at, expires_at, claimed_by)"
            " SELECT %s, 'call-' || i, %s, lpad(to_hex(i), 32, '0')::uuid, 'pending', %s::jsonb,"
            f" now(), {expires}, '' FROM generate_series(1, %s) AS i",
            [chat_id, OWNER, PAYLOAD, count],
        )


def runs(prefix: str, count: int, created_by=None) -> list[int]:
    """Runs ``<prefix>-<i>`` for i in 1..count made by ``created_by``; their primary keys in order."""
    if mysql():
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO agentstate_run (run_id, created_by_id, context, requests,"
                " input_tokens, output_tokens, total_tokens, cached_tokens, reasoning_tokens,"
                " created_at, updated_at)"
                " SELECT CONCAT(%s, '-', seq), %s, '{}', 0, 0, 0, 0, 0, 0, UTC_TIMESTAMP(6),"
                f" UTC_TIMESTAMP(6) FROM seq_1_to_{int(count)} ORDER BY seq RETURNING id",
                [prefix, getattr(created_by, "pk", None)],
            )
            return [row[0] for row in cursor.fetchall()]
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO agentstate_run (run_id, created_by_id, context, requests, input_tokens,"
            " output_tokens, total_tokens, cached_tokens, reasoning_tokens, created_at, updated_at)"
            " SELECT %s || '-' || i, %s, '{}', 0, 0, 0, 0, 0, 0, now(), now()"
            " FROM generate_series(1, %s) AS i ORDER BY i RETURNING id",
            [prefix, getattr(created_by, "pk", None), count],
        )
        return [row[0] for row in cursor.fetchall()]


def approval_requests(run_pks: list[int], tool_name: str = "mail", created_by=None) -> list[int]:
    """One pending request (call ``call-1``) in each run, filed by ``created_by``; their ids in order."""
    if mysql():
        rows = ", ".join(
            ["(%s, %s, 'call-1', '{}', 'pending', false, %s, '', UTC_TIMESTAMP(6))"] * len(run_pks)
        )
        by = getattr(created_by, "pk", None)
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO agentstate_approvalrequest (run_id, tool_name, call_id, arguments,"
                f" status, always, created_by_id, reason, created_at) VALUES {rows} RETURNING id",
                [value for pk in run_pks for value in (pk, tool_name, by)],
            )
            return [row[0] for row in cursor.fetchall()]
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO agentstate_approvalrequest (run_id, tool_name, call_id, arguments,"
            " status, always, created_by_id, reason, created_at)"
            " SELECT pk, %s, 'call-1', '{}', 'pending', false, %s, '', now()"
            " FROM unnest(%s::bigint[]) WITH ORDINALITY AS r(pk, n) ORDER BY n RETURNING id",
            [tool_name, getattr(created_by, "pk", None), run_pks],
        )
        return [row[0] for row in cursor.fetchall()]


def a_list(scope: str, name: str, length: int, owner=None) -> None:
    """A list variable holding 0 .. length - 1, written directly (no push per element)."""
    key_scope, _ = Scope.objects.get_or_create(key=scope, owner=owner)
    variable = Variable.objects.create(
        scope=key_scope, name=name, is_list=True, head=0, tail=length, version=1
    )
    if mysql():
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO agentstate_element (variable_id, position, value)"
                f" SELECT %s, seq, CAST(seq AS CHAR) FROM seq_0_to_{int(length) - 1}",
                [variable.pk],
            )
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO agentstate_element (variable_id, position, value)"
            " SELECT %s, i, to_jsonb(i) FROM generate_series(0, %s - 1) AS i",
            [variable.pk, length],
        )
