"""What the Python-API section measures: our operations, their floors, LangGraph's store.

Each entry maps a name to ``(kind, start)``: ``kind`` is ``write`` or
``read`` (which baselines it is compared with); ``start(index)`` runs in
worker ``index`` and returns its operation (see ``bench.workers``). A worker
uses its own scope, run, list or pauses, so workers never wait on one row.

The baselines do one single-row UPDATE (writes) or one SELECT by key
(reads) of ``ROW_TABLE`` in autocommit: through Django's own
``connection.cursor()``, the floor any Django code pays, and through a
plain psycopg connection, the limit of Python.
"""

import itertools
import uuid
from collections.abc import Callable

import psycopg
from psycopg.rows import dict_row

from agentstate.models import Run
from agentstate.services import approvals, budgets, context, pauses, runs
from bench import fill
from bench.env import dsn
from bench.workers import Op, Start, supplied

TAG = uuid.uuid4().hex[:8]  # names of this run's objects
ROW_TABLE = "bench_row"
ROWS = 64  # rows of ROW_TABLE; a worker or request uses one


def fresh(label: str) -> str:
    """A name no other measurement uses: ``label``, this run's tag and a random part."""
    return f"bench/{label}/{TAG}-{uuid.uuid4().hex[:12]}"


def _runs(prefix: str, count: int, created_by=None) -> list[Run]:
    pks = fill.runs(prefix, count, created_by)
    return [Run(pk=pk, run_id=f"{prefix}-{i}") for i, pk in enumerate(pks, 1)]


# Caps no measurement reaches: every add is checked against them, none refused.
NEVER = {"requests": 2**62, "total_tokens": 2**62}


def _reviewer():
    from django.contrib.auth import get_user_model

    return get_user_model()._default_manager.get_or_create(username="bench-reviewer")[0]


def subscribed(on: bool) -> None:
    """One active webhook for ``approval.requested`` (its outbox row written with each
    filed request, its delivery queued on the broker after commit), or none."""
    from agentstate.models import Webhook

    if not on:
        Webhook.objects.update(active=False)
    elif not Webhook.objects.filter(active=True).exists():
        Webhook.objects.create(
            url="https://hooks.example.com/bench", kinds=["approval.requested"], secret="whsec_x"
        )


def our_operations(supply: int) -> dict[str, tuple[str, Start]]:
    """Our operations; ``supply``: the most operations one worker can run in a measurement."""

    def put(i: int) -> Op:
        scope = fresh("put")
        return lambda: context.put(scope, "v", {"step": 7}, by="bench")

    def get(i: int) -> Op:
        scope = fresh("get")
        context.put(scope, "v", {"step": 7})
        return lambda: context.get(scope, ["v"])

    def get_list(i: int) -> Op:
        scope = fresh("get-list")
        context.put(scope, "v", {"step": 7})
        fill.a_list(scope, "list", 10)
        return lambda: context.get(scope, ["v", "list"])

    def push(i: int) -> Op:
        scope = fresh("push")
        fill.a_list(scope, "list", 10)
        return lambda: context.push(scope, "list", 7, by="bench")

    def pop(i: int) -> Op:
        scope = fresh("pop")
        fill.a_list(scope, "list", supply + 10)
        return supplied(context.pop, itertools.repeat((scope, "list"), supply))

    def pause_put(i: int) -> Op:
        chat = fresh("pause-put")
        calls = ((chat, f"call-{n}", fill.OWNER, {"step": 7}) for n in range(supply))
        return supplied(pauses.put, calls)

    def claim(i: int) -> Op:
        chat = fresh("claim")
        fill.pauses(chat, supply)
        calls = ((chat, f"call-{n}", fill.OWNER, fill.question(n)) for n in range(1, supply + 1))
        return supplied(pauses.claim, calls)

    def approve(i: int) -> Op:
        calls = ((run, "mail", "call-1") for run in _runs(fresh("approve"), supply))
        return supplied(runs.approve, calls)

    def request_approval(i: int) -> Op:
        subscribed(False)
        (run,) = _runs(fresh("request"), 1)
        calls = ((run, "mail", f"call-{n}", {"to": "a@example.com"}) for n in range(supply))
        return supplied(approvals.request_approval, calls)

    def request_approval_webhook(i: int) -> Op:
        subscribed(True)
        (run,) = _runs(fresh("request-webhook"), 1)
        calls = ((run, "mail", f"call-{n}", {"to": "a@example.com"}) for n in range(supply))
        return supplied(approvals.request_approval, calls)

    def decide(i: int) -> Op:
        reviewer = _reviewer()
        ids = fill.approval_requests([run.pk for run in _runs(fresh("decide"), supply)])
        return supplied(
            lambda pk: approvals.decide(pk, "approve", by=reviewer), ((pk,) for pk in ids)
        )

    def add_usage(i: int) -> Op:
        (run,) = _runs(fresh("usage"), 1)
        return lambda: runs.add_usage(run, input_tokens=10, output_tokens=5)

    def add_usage_budget(i: int) -> Op:
        """The same add under both budgets: the run's own, and its creator's (a user of
        this worker's, reset daily), whose row the add locks and writes too."""
        from django.contrib.auth import get_user_model

        owner = get_user_model()._default_manager.create(username=fresh("budget"))
        budgets.set_user_budget(owner, NEVER, period="day")
        (run,) = _runs(fresh("usage-budget"), 1, created_by=owner)
        budgets.set_run_budget(run, NEVER)
        return lambda: runs.add_usage(run, input_tokens=10, output_tokens=5)

    return {
        "put": ("write", put),
        "get": ("read", get),
        "get with list": ("read", get_list),
        "push": ("write", push),
        "pop": ("write", pop),
        "pause put": ("write", pause_put),
        "claim": ("write", claim),
        "approve": ("write", approve),
        "request approval": ("write", request_approval),
        "request approval, webhook": ("write", request_approval_webhook),
        "decide": ("write", decide),
        "add_usage": ("write", add_usage),
        "add_usage, budget": ("write", add_usage_budget),
    }


UPDATE = f"UPDATE {ROW_TABLE} SET n = n + 1 WHERE id = %s"
SELECT = f"SELECT n FROM {ROW_TABLE} WHERE id = %s"


def _psycopg(statement: str) -> Start:
    def start(index: int) -> Op:
        conn = psycopg.connect(dsn(), autocommit=True)
        if statement == SELECT:
            return lambda: conn.execute(statement, [index % ROWS]).fetchone()
        return lambda: conn.execute(statement, [index % ROWS]).rowcount

    return start


def _django(statement: str) -> Start:
    """The loop through Django's connection (autocommit, as Django runs outside ``atomic``)."""

    def start(index: int) -> Op:
        from django.db import connection

        def update() -> int:
            with connection.cursor() as cursor:
                cursor.execute(statement, [index % ROWS])
                return cursor.rowcount

        def select() -> tuple:
            with connection.cursor() as cursor:
                cursor.execute(statement, [index % ROWS])
                return cursor.fetchone()

        return select if statement == SELECT else update

    return start


def prepare_baselines() -> None:
    """The baselines' table (ROWS rows, a worker uses its own) and LangGraph's store tables."""
    with psycopg.connect(dsn(), autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {ROW_TABLE}")
        conn.execute(f"CREATE TABLE {ROW_TABLE} (id int PRIMARY KEY, n bigint NOT NULL)")
        conn.execute(
            f"INSERT INTO {ROW_TABLE} SELECT i, 0 FROM generate_series(0, %s) AS i", [ROWS - 1]
        )
    store = _store()
    store.setup()
    store.conn.close()


def _store():
    from langgraph.store.postgres import PostgresStore

    conn = psycopg.connect(dsn(), autocommit=True, prepare_threshold=0, row_factory=dict_row)
    return PostgresStore(conn)


def baseline_operations() -> dict[str, tuple[str, Start]]:
    """The Django-cursor and plain psycopg loops (one statement per operation), and
    LangGraph's PostgresStore."""

    def store_op(call: Callable) -> Start:
        def start(i: int) -> Op:
            store = _store()
            namespace = ("bench", fresh("langgraph"))
            store.put(namespace, "v", {"step": 7})
            return lambda: call(store, namespace)

        return start

    return {
        "Django UPDATE": ("write", _django(UPDATE)),
        "Django SELECT": ("read", _django(SELECT)),
        "psycopg UPDATE": ("write", _psycopg(UPDATE)),
        "psycopg SELECT": ("read", _psycopg(SELECT)),
        "LangGraph put": ("write", store_op(lambda s, ns: s.put(ns, "v", {"step": 7}))),
        "LangGraph get": ("read", store_op(lambda s, ns: s.get(ns, "v"))),
    }


def statements() -> dict[str, dict[str, int]]:
    """Each operation's statements and round trips in one call (``bench.counts``), with
    the Django-cursor floor's beside them; made in this process, on objects of their own."""
    from bench import counts

    prepare_baselines()
    operations = {
        **our_operations(4),
        **{k: v for k, v in baseline_operations().items() if k.startswith("Django")},
    }
    figures = {}
    for name, (_, start) in operations.items():
        op = start(0)
        op()
        figure = counts.of(op)
        figures[name] = {"statements": figure["statements"], "round_trips": figure["round_trips"]}
    return figures
