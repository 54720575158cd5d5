"""The server's instructions per call of the writes' functions, under callgrind:
a figure that does not move with the machine's load.

    .venv/bin/python bench/fn_instr.py prepare            # DATABASE_URL: a scratch cluster
    .venv/bin/python bench/fn_instr.py run --data DIR [--variant FILE.sql ...] [OPERATION ...]

``prepare`` fills the database of ``DATABASE_URL`` (migrated; on a cluster of
its own, which ``run`` then reads stopped) with the calls' rows: two users, the
runs of the filings, a pending request per run to decide, twenty pauses to put
again, pending pauses to claim, other threads' checkpoints (``others``); their
parameters go to ``PARAMS`` (``FN_INSTR_PARAMS``: another file). ``run``, for
each variant (a file of ``CREATE OR REPLACE FUNCTION``, a migration's file of
``agentstate/migrations/sql/``; ``none``, or no variant: the functions as migrated): the cluster's
data directory ``DIR`` copied, the variant installed (a server started on the
copy for it), then for each operation and each of two loop lengths, a copy of
that run in single-user mode (``postgres --single``: one backend, each statement
its own transaction, its commit included) under callgrind; the two runs'
instruction counts, differenced and divided, are one call's. The calls are the
ones ``bench/fn_cpu.py`` times (``CALLS``), sent as literals: the statement
around the function is parsed and planned at every call, the same for every
variant.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import env
from bench.fn_cpu import CALLS, inputs, users

PARAMS = Path(os.environ.get("FN_INSTR_PARAMS", "/tmp/agentstate_fn_instr.json"))
BIN = Path("/usr/lib/postgresql/15/bin")
SUPPLY = 400
WARM = 20
LENGTHS = (30, 130)
OTHERS = 50  # threads of checkpoints besides the measured one's
# The server that installs a variant: a port of this process, so that runs at once do not meet.
PORT = 5500 + os.getpid() % 400
KEEP: Path | None = None  # --keep: where the callgrind files are copied


def prepare() -> None:
    import psycopg

    env.create_database()
    env.setup_django()
    env.migrate()
    with psycopg.connect(env.dsn(), autocommit=True) as conn:
        owner, service = users(conn)
        params = {
            op: [[str(v) if isinstance(v, uuid.UUID) else v for v in p] for p in ps]
            for op in CALLS
            for ps in [inputs(conn, op, f"fi-{op}", SUPPLY, owner, service)]
        }
        others(conn)
        conn.execute("VACUUM ANALYZE")
    PARAMS.write_text(json.dumps({"db": env.db_name(), "params": params}))


def others(conn) -> None:
    """Other threads, their checkpoints and early writes, so that the tables are
    not empty when analyzed (the plans of a small table scan it)."""
    for k in range(OTHERS):
        for p in inputs(conn, "checkpoint", f"fi-other-{k}", 100, 0, 0):
            conn.execute(CALLS["checkpoint"], p)
    conn.execute(
        "INSERT INTO agentstate_checkpointwrite (thread_id, checkpoint_ns, checkpoint_id,"
        " task_id, task_path, idx, channel, type, blob)"
        " SELECT t.id, '', 'never-put-' || i, 'task', '', 0, 'messages', 'bytes', 'x'"
        " FROM agentstate_thread t, generate_series(1, 20) AS i"
        " WHERE t.thread_id LIKE 'fi-other-%'"
    )
    conn.execute(
        "INSERT INTO agentstate_thread (thread_id, created_at, updated_at)"
        " SELECT 'fi-idle-' || i, now(), now() FROM generate_series(1, 2000) AS i"
    )


def literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "ARRAY[" + ", ".join(literal(v) for v in value) + "]"
    return "'" + str(value).replace("'", "''") + "'"


def script(op: str, params: list, count: int) -> str:
    parts = [part.replace("%%", "%") for part in re.split(r"(?<!%)%s", CALLS[op])]
    lines = []
    for p in params[:count]:
        text = parts[0] + "".join(literal(v) + rest for v, rest in zip(p, parts[1:], strict=True))
        lines.append(text + ";")
    return "\n".join(lines) + "\n"


def as_postgres(*command: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", "postgres", "--", *command], **kwargs)


def copy(source: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    as_postgres("cp", "-a", str(source), str(target), check=True)


def install(data: Path, variant: Path, db: str) -> None:
    log = data.parent / "install.log"
    as_postgres(
        str(BIN / "pg_ctl"),
        "-D",
        str(data),
        "-o",
        f"-p {PORT}",
        "-l",
        str(log),
        "-w",
        "start",
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            [
                "psql",
                f"postgresql://postgres@127.0.0.1:{PORT}/{db}",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-f",
                str(variant),
            ],
            check=True,
            capture_output=True,
        )
    finally:
        as_postgres(
            str(BIN / "pg_ctl"), "-D", str(data), "-w", "stop", check=True, capture_output=True
        )


def instructions(data: Path, db: str, text: str, work: Path) -> int:
    run = work / "run"
    copy(data, run)
    out = work / "cg.out"
    done = as_postgres(
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        str(BIN / "postgres"),
        "--single",
        "-D",
        str(run),
        "-c",
        f"port={PORT + 1}",
        db,
        input=text,
        capture_output=True,
        text=True,
    )
    for output in (done.stdout, done.stderr):
        if "ERROR" in output:
            sys.exit(f"a call failed: {output[output.index('ERROR') :][:400]}")
    if KEEP:
        shutil.copy(out, KEEP / f"cg.{len(text.splitlines())}")
    found = re.search(r"Collected : (\d+)", done.stderr)
    if not found:
        sys.exit(done.stderr[-2000:])
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare")
    r = sub.add_parser("run")
    r.add_argument("operations", nargs="*")
    r.add_argument("--data", type=Path, required=True)
    r.add_argument("--variant", action="append", type=Path, default=[])
    r.add_argument("--keep", type=Path, help="a folder for the callgrind files")
    args = parser.parse_args()
    global KEEP
    KEEP = getattr(args, "keep", None)
    if args.command == "prepare":
        prepare()
        return
    state = json.loads(PARAMS.read_text())
    db, params = state["db"], state["params"]
    ops = args.operations or list(CALLS)
    work = Path(tempfile.mkdtemp(prefix="fn_instr_", dir="/tmp"))
    shutil.chown(work, "postgres")
    try:
        for variant in args.variant or [None]:
            data = work / "variant"
            copy(args.data, data)
            if variant is not None and variant.name != "none":
                install(data, variant.resolve(), db)
            for op in ops:
                short, long = (
                    instructions(data, db, script(op, params[op], WARM + n), work) for n in LENGTHS
                )
                per = (long - short) / (LENGTHS[1] - LENGTHS[0])
                name = variant.name if variant else "migrated"
                print(f"{op:7} {name:40} {per / 1000:8.1f} k instructions a call", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
