"""The migrations: reversible down to 0.1.0's, and the PL/pgSQL functions they
install (their frozen SQL files, in order) the same as the current SQL."""

import io
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

from agentstate.backends.postgresql.schema import CURRENT, FROZEN, RunSQLFile

RELEASED = ("agentstate", "0002_leaner_indexes")  # 0.1.0's last migration

# A comment, a string, a dollar-quoted body, the end of a statement, or anything else.
TOKEN = re.compile(r"--[^\n]*|'(?:[^']|'')*'|(\$\w*\$).*?\1|;|[^-'$;]+|.", re.S)
CREATED = re.compile(r"CREATE (?:OR REPLACE )?(FUNCTION|TRIGGER) (\w+)")
DROPPED = re.compile(r"DROP (FUNCTION|TRIGGER) (?:IF EXISTS )?(\w+)")


def _statements(sql: str) -> list[str]:
    """The statements of a script, comments outside bodies left out, each one's
    whitespace collapsed."""
    statements, current = [], []
    for match in TOKEN.finditer(sql):
        token = match.group()
        if token == ";":
            statements.append(" ".join("".join(current).split()))
            current = []
        elif not token.startswith("--"):
            current.append(token)
    return [s for s in statements if s]


def _defined(paths: list[Path]) -> dict[tuple[str, str], str]:
    """(FUNCTION or TRIGGER, name): its definition, as the scripts run in order
    leave it (a later one replaces an earlier one; a DROP removes it)."""
    defined: dict[tuple[str, str], str] = {}
    for path in paths:
        for statement in _statements(path.read_text()):
            if created := CREATED.match(statement):
                defined[created.groups()] = statement.replace("CREATE OR REPLACE ", "CREATE ", 1)
            elif dropped := DROPPED.match(statement):
                defined.pop(dropped.groups(), None)
    return defined


def _frozen_files() -> list[str]:
    """The SQL files that the migrations run forwards, in the order they run."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    (leaf,) = loader.graph.leaf_nodes("agentstate")
    return [
        operation.forward
        for key in loader.graph.forwards_plan(leaf)
        if key[0] == "agentstate"
        for operation in loader.graph.nodes[key].operations
        if isinstance(operation, RunSQLFile)
    ]


def test_the_migrations_define_every_function_as_the_current_sql():
    """A function changed in ``backends/postgresql/sql/`` and no migration that
    installs the change (or the other way round) fails here."""
    frozen = _defined([FROZEN / name for name in _frozen_files()])
    current = _defined(sorted(CURRENT.glob("*.sql")))
    assert current, "no function found in the current SQL"
    differ = sorted(
        f"{kind} {name}"
        for kind, name in frozen.keys() | current.keys()
        if frozen.get((kind, name)) != current.get((kind, name))
    )
    assert differ == [], (
        "the migrations' SQL files leave these unlike backends/postgresql/sql/:"
        " a new migration with its own SQL file installs them (docs/development.md)"
    )


def test_each_reverse_file_leaves_the_functions_as_the_migrations_before_it():
    """Undoing a migration's SQL gives back every function as the earlier files
    defined it (a function the migration changed, recreated as it was)."""
    files = _frozen_files()
    differ = {}
    for k, forward in enumerate(files[1:], start=1):
        before = _defined([FROZEN / name for name in files[:k]])
        undone = _defined(
            [FROZEN / name for name in files[: k + 1]]
            + [FROZEN / forward.replace(".sql", ".reverse.sql")]
        )
        differ[forward] = sorted(
            f"{kind} {name}"
            for kind, name in before.keys() | undone.keys()
            if before.get((kind, name)) != undone.get((kind, name))
        )
    assert len(differ) >= 4
    assert {file: names for file, names in differ.items() if names} == {}


def test_every_frozen_sql_file_is_run_by_the_migration_of_its_number():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    run = {
        file: name
        for (app, name), migration in loader.disk_migrations.items()
        if app == "agentstate"
        for operation in migration.operations
        if isinstance(operation, RunSQLFile)
        for file in (operation.forward, operation.reverse)
    }
    assert sorted(run) == sorted(path.name for path in FROZEN.glob("*.sql"))
    assert [file for file, name in run.items() if file[:5] != name[:5]] == []


def _functions() -> int:
    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = current_schema() AND p.proname LIKE 'agentstate\\_%%'"
        )
        (count,) = cursor.fetchone()
    return int(count)


@pytest.mark.django_db(transaction=True)
def test_the_migrations_go_back_to_the_released_ones_and_forward_again():
    executor = MigrationExecutor(connection)
    leaves = [key for key in executor.loader.graph.leaf_nodes() if key[0] == "agentstate"]
    installed = _functions()
    try:
        executor.migrate([RELEASED])
        assert _functions() == 0
        tables = connection.introspection.table_names()
        assert "agentstate_run" in tables and "agentstate_webhook" not in tables
    finally:
        executor.loader.build_graph()
        executor.migrate(leaves)
    assert _functions() == installed
    assert installed > 0 or connection.vendor != "postgresql"
    assert "agentstate_webhook" in connection.introspection.table_names()


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_indexes_of_large_tables_change_without_stopping_their_writes():
    """``0024``'s indexes are built and dropped concurrently, outside a transaction,
    each new one beside the one it replaces until it takes its name."""
    out = io.StringIO()
    call_command("sqlmigrate", "agentstate", "0024", stdout=out)
    statements = [line for line in out.getvalue().splitlines() if not line.startswith("--")]
    kinds = [re.match(r"(CREATE|DROP|ALTER) INDEX( CONCURRENTLY)?", s)[0] for s in statements]
    assert kinds == ["CREATE INDEX CONCURRENTLY", "DROP INDEX CONCURRENTLY", "ALTER INDEX"] * 4
    assert "BEGIN;" not in statements


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_an_index_is_not_built_concurrently_in_a_transaction():
    from django.apps import apps
    from django.db import NotSupportedError, models
    from django.db.migrations.state import ProjectState

    from agentstate.backends.postgresql.schema import AddIndexConcurrently

    state = ProjectState.from_apps(apps)
    index = models.Index(fields=["owner"], name="agentstate_pause_scratch")
    operation = AddIndexConcurrently(model_name="pausedrun", index=index)
    after = state.clone()
    operation.state_forwards("agentstate", after)
    with pytest.raises(NotSupportedError, match="atomic = False"):
        with connection.schema_editor() as editor:
            operation.database_forwards("agentstate", editor, state, after)


@pytest.mark.django_db(transaction=True)
def test_the_budget_events_and_their_webhooks_take_the_kind_budget_set_and_back():
    """``0025`` renames the kind ``budget.changed`` to ``budget.set`` in the events
    recorded so far and the webhooks subscribed to it; taken back, the other way."""
    from agentstate.models import Event, Webhook

    def kinds() -> tuple[list[str], list[list[str]]]:
        return (
            list(Event.objects.order_by("pk").values_list("kind", flat=True)),
            list(Webhook.objects.order_by("pk").values_list("kinds", flat=True)),
        )

    for kind in ("budget.set", "pause.created"):
        Event.objects.create(kind=kind, object_type="budget", object_id="run:r")
    for subscribed in (["pause.created", "budget.set"], [], ["pause.created"]):
        Webhook.objects.create(url="https://example.com/hook", secret="s", kinds=subscribed)
    renamed = (
        ["budget.set", "pause.created"],
        [["pause.created", "budget.set"], [], ["pause.created"]],
    )
    assert kinds() == renamed
    executor = MigrationExecutor(connection)
    leaves = [key for key in executor.loader.graph.leaf_nodes() if key[0] == "agentstate"]
    try:
        executor.migrate([("agentstate", "0024_index_counts")])
        assert kinds() == (
            ["budget.changed", "pause.created"],
            [["pause.created", "budget.changed"], [], ["pause.created"]],
        )
    finally:
        executor.loader.build_graph()
        executor.migrate(leaves)
    assert kinds() == renamed
