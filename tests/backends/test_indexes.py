"""Every index the models declare earns its writes: none repeats what another serves;
what a listing counts, it counts from one index alone."""

from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection, models
from django.utils import timezone

from agentstate.conf import agentstate_settings
from agentstate.models import Element, Event, PausedRun


def _indexes(model: type[models.Model]) -> list[tuple[str, tuple[str, ...], str]]:
    """(name, columns, condition) of every index the table gets, plain or unique."""
    found = []
    for field in model._meta.concrete_fields:
        if field.primary_key or field.unique or field.db_index:
            found.append((f"field {field.name}", (field.column,), ""))
    for index in [*model._meta.indexes, *model._meta.constraints]:
        fields = getattr(index, "fields", ())
        if fields:
            columns = tuple(model._meta.get_field(f).column for f in fields)
            found.append((index.name, columns, str(getattr(index, "condition", None) or "")))
    return found


@pytest.mark.parametrize(
    "model", list(apps.get_app_config("agentstate").get_models()), ids=lambda m: m.__name__
)
def test_no_index_is_a_prefix_of_another(model):
    indexes = _indexes(model)
    covered = [
        (name, other)
        for name, columns, condition in indexes
        for other, longer, other_condition in indexes
        if other != name and condition == other_condition and longer[: len(columns)] == columns
    ]
    assert covered == []


def test_an_element_is_found_through_one_index():
    """Popping from a long list cannot pick an index that scans every element."""
    assert sorted(columns for _, columns, _ in _indexes(Element)) == [
        ("id",),
        ("variable_id", "position"),
    ]


def _plan(statement: str, params: dict) -> str:
    """PostgreSQL's plan of ``statement``, as on tables of many rows: no scan of a
    whole table pays there (``enable_seqscan``, ``enable_bitmapscan`` off)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute(f"EXPLAIN {statement}", {**params, "limit": 20, "offset": 0})
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.postgres_only
@pytest.mark.django_db
@pytest.mark.parametrize("status", [None, "pending", "expired"])
def test_a_caller_s_pauses_are_counted_from_the_indexes_alone(make_user, status):
    """The count of the pauses a caller owns or created, of a status too (pending
    and expired depend on each one's expiry), reads the owner's and the creator's
    indexes and no pause's row: index-only scans, where the table's pages are all
    visible since its last vacuum."""
    from agentstate.backends.postgresql import pauses

    # A table the planner knows: twenty owners' pending pauses, due in an hour, a
    # tenth made by an agent's account.
    agent = make_user("agent")
    later = timezone.now() + timedelta(hours=1)
    PausedRun.objects.bulk_create(
        PausedRun(
            chat_id=f"chat-{n}",
            tool_call_id="call",
            owner=f"owner-{n % 20}",
            created_by=agent if n % 10 == 0 else None,
            expires_at=later,
        )
        for n in range(2000)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {PausedRun._meta.db_table}")
    plan = _plan(
        pauses._page_statement((), status, True), {"username": "owner-1", "creator": agent.pk}
    )
    assert "Index Only Scan using agentstate_pause_owner" in plan, plan
    assert "Index Only Scan using agentstate_pause_created_by" in plan, plan


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_caller_s_pending_requests_are_counted_from_the_index_alone():
    """The count of the pending requests a caller filed needs each one's deadline:
    the index of its requests holds it, so that the count reads no request's row."""
    from agentstate.backends.postgresql import runs

    statement = runs._page_statement(runs._PageShape((), "pending", True, False))
    plan = _plan(statement, {"ttl": agentstate_settings.APPROVAL_TTL, "creator": 1})
    assert "Index Only Scan using agentstate_request_creator" in plan, plan


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_the_events_a_caller_created_for_others_are_counted_from_the_index_alone(make_user):
    """A caller's events are what it owns and what it created for others: the second
    part needs each event's owner, which the creator's index holds, so that both
    parts are counted and cut from an index alone."""
    from agentstate.backends.postgresql import trail

    # A table the planner knows: an agent's account records events for fifty owners.
    agent, other = make_user("agent"), make_user("other")
    Event.objects.bulk_create(
        Event(
            kind="pause.put",
            actor="agent",
            object_type="pausedrun",
            object_id=f"chat-{n}#call",
            owner=f"owner-{n % 50}",
            details={},
            created_by=agent if n % 5 == 0 else other,
        )
        for n in range(5000)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Event._meta.db_table}")
    statement = trail._page_statement(trail._Shape((), False, True, True, False))
    plan = _plan(statement, {"username": "agent", "creator": agent.pk, "types": []})
    assert plan.count("Index Only Scan Backward using agentstate_event_created_by") == 1, plan
    assert plan.count("Index Only Scan using agentstate_event_created_by") == 1, plan
