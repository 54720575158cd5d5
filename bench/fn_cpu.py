"""The server's CPU per call of the writes' functions, one version against another.

    .venv/bin/python bench/fn_cpu.py [OPERATION ...] [--n 300] [--rounds 3]
        [--variant FILE.sql ...]

Each ``--variant`` is a file of ``CREATE OR REPLACE FUNCTION`` statements (a
migration's file of ``agentstate/migrations/sql/``, forward or reverse), run
before that variant's calls; none given: the functions as migrated. For each
round, each variant in turn, each operation (``file``: a filing of a pending
request, ``decide``: an approve of a pending request by another user, ``put``:
a pause replaced, ``claim``: a pending pause claimed, ``checkpoint``: a LangGraph
checkpoint's put as the saver sends it (``saver_puts``); none named: every one):
a new connection, its inputs made (untimed), 20 calls untimed, then ``--n``
calls, each its own transaction (autocommit), as psycopg sends them (prepared,
parameters by name, as ``agentstate.db`` does). Per call: the CPU of the
connection's backend (``/proc/<pid>/schedstat``, statement and commit), the
least over the rounds (the machine is shared), with every round's figure.
The variants run alternated, so a change of the machine's load falls on each.
"""

import argparse
import json
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import env

WARM = 20
OWNER = "fn-owner"
MEMBERSHIP = ["auth_user_groups", "user_id", "group_id"]

CALLS = {
    "file": "SELECT agentstate_request_approval(p_run_id => %s, p_tool => 'mail', p_call => %s,"
    " p_arguments => %s::jsonb, p_decided_reason => 'Decided by the run''s approval records.',"
    " p_policy_reason => 'Decided by approval policy %%s.', p_policy_actor => 'policy:%%s',"
    " p_ttl => '1 day'::interval, p_reach => %s, p_user => %s, p_actor => %s,"
    " p_digest => %s)",
    "decide": "SELECT agentstate_decide(p_id => %s, p_approve => true, p_always => false,"
    " p_reason => '', p_arguments => NULL, p_ttl => '1 day'::interval, p_user => %s,"
    " p_actor => %s, p_digest => NULL, p_membership => %s)",
    "put": "SELECT agentstate_put_pause(p_chat => %s, p_call => %s, p_owner => %s,"
    " p_payload => '{\"step\": 7}'::jsonb, p_ttl => '1 day'::interval, p_question => %s,"
    " p_reach_user => NULL, p_reach_name => NULL, p_user_id => %s, p_actor => %s)",
    "claim": "SELECT agentstate_claim(p_chat => %s, p_call => %s, p_owner => %s,"
    " p_question => %s, p_user_id => %s, p_actor => %s)",
    "checkpoint": "SELECT agentstate_put_checkpoint(p_thread => %s, p_ns => '', p_id => %s,"
    " p_parent => %s, p_checkpoint => %s::jsonb, p_metadata => %s::jsonb,"
    " p_values => %s::bytea, p_base => %s, p_refuse => false, p_writes => NULL)",
}


def users(conn) -> tuple[int, int]:
    ids = []
    for name in ("fn-owner", "fn-service"):
        row = conn.execute("SELECT id FROM auth_user WHERE username = %s", [name]).fetchone()
        if row is None:
            row = conn.execute(
                "INSERT INTO auth_user (password, is_superuser, username, first_name,"
                " last_name, email, is_staff, is_active, date_joined)"
                " VALUES ('', false, %s, '', '', '', false, true, now()) RETURNING id",
                [name],
            ).fetchone()
        ids.append(row[0])
    return ids[0], ids[1]


def inputs(conn, op: str, tag: str, count: int, owner: int, service: int) -> list[list]:
    """The parameters of ``count`` calls of ``op``, their rows made."""
    if op == "file":
        conn.execute(
            "INSERT INTO agentstate_run (run_id, created_by_id, context, requests, input_tokens,"
            " output_tokens, total_tokens, cached_tokens, reasoning_tokens, created_at,"
            " updated_at) SELECT %s || '-' || i, %s, '{}', 0, 0, 0, 0, 0, 0, now(), now()"
            " FROM generate_series(0, 19) AS i",
            [tag, owner],
        )
        return [
            [f"{tag}-{k % 20}", f"call-{k}", '{"to": "a@b.c"}', owner, owner, "fn-owner", "d" * 64]
            for k in range(count)
        ]
    if op == "decide":
        ids = conn.execute(
            "WITH r AS (INSERT INTO agentstate_run (run_id, created_by_id, context, requests,"
            " input_tokens, output_tokens, total_tokens, cached_tokens, reasoning_tokens,"
            " created_at, updated_at) SELECT %s || '-' || i, %s, '{}', 0, 0, 0, 0, 0, 0, now(),"
            " now() FROM generate_series(1, %s) AS i RETURNING id)"
            " INSERT INTO agentstate_approvalrequest (run_id, tool_name, call_id, arguments,"
            " status, always, created_by_id, reason, created_at)"
            " SELECT id, 'mail', 'call-1', '{}', 'pending', false, %s, '', now() FROM r"
            " ORDER BY id RETURNING id",
            [tag, owner, count, owner],
        ).fetchall()
        return [[pk, service, "fn-service", MEMBERSHIP] for (pk,) in sorted(ids)]
    if op == "put":
        # the REST section's puts: twenty pauses, each put replacing one
        return [
            [tag, f"call-{k % 20}", OWNER, uuid.uuid4(), owner, "fn-owner"] for k in range(count)
        ]
    if op == "claim":
        conn.execute(
            "INSERT INTO agentstate_pausedrun (chat_id, tool_call_id, owner, question_id, status,"
            " payload, created_at, expires_at, claimed_by)"
            " SELECT %s, 'call-' || i, %s, lpad(to_hex(i), 32, '0')::uuid, 'pending',"
            " '{\"step\": 7}', now(), now() + interval '1 day', ''"
            " FROM generate_series(1, %s) AS i",
            [tag, OWNER, count],
        )
        return [
            [tag, f"call-{k}", OWNER, str(uuid.UUID(int=k)), owner, "fn-owner"]
            for k in range(1, count + 1)
        ]
    if op == "checkpoint":
        return saver_puts(tag, count)
    raise ValueError(op)


def saver_puts(thread: str, count: int) -> list[list]:
    """The parameters of the bench's saver puts (``bench/langgraph_ops.py``: two new
    channel values, each put the next one's parent) on a new thread, as the saver
    sends them: its puts run with the database's call taken out (each answered as
    stored), their arguments kept. The values' bytes as a bytea literal."""
    from unittest import mock

    from agentstate.backends.postgresql.checkpoints import CheckpointOperations
    from agentstate.contrib.langgraph import AgentStateSaver
    from agentstate.types import Put
    from bench.langgraph_ops import _checkpoint

    sent: list[list] = []

    def put_checkpoint(
        self,
        thread_id,
        ns,
        checkpoint_id,
        parent,
        body,
        meta,
        values,
        base,
        refuse,
        writes=None,
        parent_writes=None,
    ):
        if ns or refuse or writes is not None or parent_writes is not None:
            raise AssertionError("the statement of CALLS names these as constants")
        sent.append(
            [
                thread_id,
                checkpoint_id,
                parent,
                json.dumps(body),
                json.dumps(meta),
                "\\x" + values.hex(),
                base,
            ]
        )
        return Put(forked=False, rebase=False)

    saver = AgentStateSaver()
    config: dict = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    with mock.patch.object(CheckpointOperations, "put_checkpoint", put_checkpoint):
        for step in range(count):
            checkpoint, metadata, versions = _checkpoint(step)
            config = saver.put(config, checkpoint, metadata, versions)
    return sent


def measure(op: str, tag: str, n: int) -> float:
    import psycopg

    with psycopg.connect(env.dsn(), autocommit=True) as conn:
        owner, service = users(conn)
        params = inputs(conn, op, tag, WARM + n, owner, service)
        (backend,) = conn.execute("SELECT pg_backend_pid()").fetchone()
        statement = CALLS[op]
        for p in params[:WARM]:
            conn.execute(statement, p, prepare=True).fetchone()
        began = env.cpu_seconds(backend)
        for p in params[WARM:]:
            conn.execute(statement, p, prepare=True).fetchone()
        return (env.cpu_seconds(backend) - began) * 1e6 / n


def install(path: Path | None) -> None:
    import psycopg

    if path is None:
        return
    with psycopg.connect(env.dsn(), autocommit=True) as conn:
        conn.execute(path.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("operations", nargs="*")
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variant", action="append", type=Path, default=[])
    args = parser.parse_args()
    env.create_database()
    env.setup_django()
    env.migrate()
    ops = args.operations or list(CALLS)
    variants: list[Path | None] = args.variant or [None]
    figures: dict[tuple[int, str], list[float]] = {}
    run = uuid.uuid4().hex[:8]
    for r in range(args.rounds):
        for v, variant in enumerate(variants):
            install(variant)
            for op in ops:
                figures.setdefault((v, op), []).append(
                    measure(op, f"fn-{run}-{r}-{v}-{op}", args.n)
                )
    install(variants[-1])  # the last variant stays installed
    for op in ops:
        for v, variant in enumerate(variants):
            runs = figures[(v, op)]
            name = variant.name if variant else "migrated"
            shown = " ".join(f"{x:.0f}" for x in runs)
            print(f"{op:7} {name:40} least {min(runs):6.0f} µs  ({shown})")


if __name__ == "__main__":
    main()
