"""The pages of approval requests and events read on one plan per connection where one
plan serves every caller (``reading.page_rows``, PostgreSQL): a generic plan, made
without the caller's values, sent in one pipeline after the settings that ask for it
(``reading.GENERIC_PLAN``), which end with the pipeline. Such a plan must read, for a
caller of a few rows among many of another, what a plan made for that caller reads:
without the settings' ``enable_incremental_sort = off``, it read every event of the
other caller (walking the events' time index, filtering the owner)."""

import contextlib
import json
import re
from datetime import timedelta
from itertools import product
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentstate.backends.postgresql import reading, runs, trail
from agentstate.conf import agentstate_settings
from agentstate.models import ApprovalRequest, Event, Run
from tests.conftest import is_token_lookup

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    # the plan is kept where the statement is prepared, which a pooler's connections
    # do not keep (tests/site/test_pgbouncer.py: nothing is prepared there)
    pytest.mark.direct_only,
]

Status = ApprovalRequest.Status
MANY = 2000


def rows_read(statement: str, params: dict[str, Any], generic: bool, table: str) -> int:
    """The rows of ``table`` that ``statement`` reads, its filters' rejects included,
    run as a prepared statement on a generic plan with the settings the pages give it
    (``reading.GENERIC_PLAN``), or on a plan made for ``params``."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        # typed where the statement alone does not say (LIMIT %(offset)s + %(limit)s)
        cast = "::bigint" if match.group(1) in ("limit", "offset") else ""
        return f"${names.index(match.group(1)) + 1}{cast}"

    prepared = re.sub(r"%\((\w+)\)s", number, statement).replace("%%", "%")
    with transaction.atomic(), connection.cursor() as cursor:
        if generic:
            cursor.execute(reading.GENERIC_PLAN)
        else:
            cursor.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        cursor.execute(f"PREPARE page AS {prepared}")
        arguments = ", ".join(["%s"] * len(names))
        cursor.execute(
            f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE page({arguments})",
            [params[name] for name in names],
        )
        (plan,) = cursor.fetchone()
        cursor.execute("DEALLOCATE page")
    plan = json.loads(plan) if isinstance(plan, str) else plan

    def read(node: dict[str, Any]) -> int:
        own = 0
        if node.get("Relation Name") == table:
            found = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            own = round(found * node["Actual Loops"])
        return own + sum(read(child) for child in node.get("Plans", []))

    return read(plan[0]["Plan"])


@pytest.fixture
def crowded(make_user):
    """A creator of many pending requests and of many events, beside one of a few whose
    rows come last in each page's order (the newest requests, the oldest events), on
    tables the planner knows."""
    many, few = make_user("many"), make_user("few")
    # rows written and rolled back first, as a busy table has: dead entries in its
    # indexes, so that the caller's index costs the planner more than it would fresh
    with contextlib.suppress(RuntimeError), transaction.atomic():
        Event.objects.bulk_create(
            Event(kind="pause.put", actor="a", object_type="pausedrun", object_id=str(n))
            for n in range(5 * MANY)
        )
        raise RuntimeError("rolled back")
    run = Run.objects.create(run_id="crowded", created_by=many)
    mine = Run.objects.create(run_id="mine", created_by=few)
    ApprovalRequest.objects.bulk_create(
        ApprovalRequest(
            run=run if n < MANY else mine,
            tool_name="mail",
            call_id=f"call-{n}",
            arguments={"n": n},
            created_by=many if n < MANY else few,
        )
        for n in range(MANY + 3)
    )
    Event.objects.bulk_create(
        Event(
            kind="pause.put",
            actor="agent",
            object_type="pausedrun",
            object_id=f"chat-{n}#call",
            owner="many" if n < MANY else "few",
            details={},
            created_by=many if n < MANY else few,
            created_at=timezone.now() - timedelta(seconds=n),
        )
        for n in range(MANY + 3)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {ApprovalRequest._meta.db_table}")
        cursor.execute(f"ANALYZE {Event._meta.db_table}")
    return many, few


def test_a_generic_plan_reads_no_more_for_a_caller_of_a_few_than_the_caller_s_own(crowded):
    """Every shape of the two pages read on a generic plan, as the caller of three rows
    among two thousand of another: the plan made for no caller in particular reads
    about what a plan made for that caller reads, never the other's rows."""
    _, few = crowded
    shapes = [
        shape
        for named, status, reached, nobody in product(
            [(), ("tool_name",), ("run_id",)],
            [None, Status.PENDING, Status.EXPIRED, ""],
            [False, True],
            [False, True],
        )
        if reached or not nobody
        if (shape := runs._PageShape(named, status, reached, nobody)).generic
    ]
    assert {(shape.status, shape.reached, shape.nobody) for shape in shapes} == {
        (Status.PENDING, True, False),
        ("", True, False),
    }
    params = {
        "ttl": agentstate_settings.APPROVAL_TTL,
        "status": Status.PENDING.value,
        "creator": few.pk,
        "limit": 20,
        "offset": 0,
    }
    table = ApprovalRequest._meta.db_table
    for shape in shapes:
        statement = runs._page_statement(shape)
        generic = rows_read(statement, params, True, table)
        custom = rows_read(statement, params, False, table)
        assert generic <= custom + 20, (shape, generic, custom)
    events = [trail._Shape((), False, True, created, False) for created in (False, True)]
    assert all(shape.generic for shape in events)
    params = {"username": "few", "creator": few.pk, "types": [], "limit": 20, "offset": 0}
    for shape in events:
        statement = trail._page_statement(shape)
        generic = rows_read(statement, params, True, Event._meta.db_table)
        custom = rows_read(statement, params, False, Event._meta.db_table)
        assert generic <= custom + 20, (shape, generic, custom)


def test_shapes_one_plan_cannot_serve_are_planned_for_their_caller():
    """A creator's requests of every status are sorted, expired ones are an ``OR``, a
    filter's column may be rare or common, events by object type are an ``OR``, and a
    listing of everyone's rows (no caller to pick them) is read in the time order of
    all, which the generic plan's settings forbid: each keeps a plan of its own."""
    assert not runs._PageShape((), None, True, False).generic
    assert not runs._PageShape((), Status.EXPIRED, True, False).generic
    assert not runs._PageShape(("tool_name",), Status.PENDING, True, False).generic
    assert not runs._PageShape((), Status.PENDING, False, False).generic
    assert not runs._PageShape((), Status.PENDING, True, True).generic
    assert not trail._Shape(("kind",), False, True, True, False).generic
    assert not trail._Shape((), True, True, True, False).generic
    assert not trail._Shape((), False, True, True, True).generic
    assert not trail._Shape((), False, False, False, False).generic


@pytest.mark.parametrize(
    "path",
    ["/api/approval-requests/?status=pending&page_size=2", "/api/events/?page_size=2"],
)
def test_a_page_runs_on_a_generic_plan_in_one_pipeline_and_the_setting_ends_with_it(crowded, path):
    """Once prepared, the page runs on a generic plan; its answer is the one the page
    gives where it is planned for its caller (inside a transaction); the setting that
    asks for the plan does not outlast the page's round trip."""
    _, few = crowded
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=few).key}")
    for _ in range(6):  # psycopg prepares a statement from its fifth run (the tests' threshold)
        assert api.get(path).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        answer = api.get(path)
    assert answer.status_code == 200, answer.content
    token, setting, page = (q["sql"] for q in queries)
    assert is_token_lookup(token) and setting == reading.GENERIC_PLAN, setting
    assert page.startswith("SELECT p.*"), page
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = %s",
            [page],
        )
        ((generic, custom),) = cursor.fetchall()
        assert generic >= 1 and custom == 0, (generic, custom)
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone() == ("auto",)
    with transaction.atomic():
        planned = api.get(path)
    assert planned.json() == answer.json() and answer.json()["count"] == 3
