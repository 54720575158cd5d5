"""Races and rules each backend keeps beyond the suite's own concurrency tests:
many callers creating one object, a put racing a cancel, and keys compared
exactly (case, accents and trailing spaces matter) on every database."""

import pytest
from rest_framework.test import APIClient

from agentstate.exceptions import NotPending, PauseNotFound
from agentstate.models import PausedRun, Run
from agentstate.services import context, pauses, runs

pytestmark = pytest.mark.django_db(transaction=True)

CLIENTS = 20


def test_twenty_clients_creating_one_run_one_201_the_rest_409(concurrently, alice):
    for round_ in range(4):
        run_id = f"contested-{round_}"

        def create(i: int, run_id: str = run_id) -> tuple[int, str | None]:
            api = APIClient()
            api.force_authenticate(alice)
            response = api.post("/api/runs/", {"run_id": run_id}, format="json")
            return response.status_code, response.json().get("code")

        results = concurrently(CLIENTS, create)
        assert sorted(results, key=str) == [(201, None)] + [(409, "run_exists")] * (CLIENTS - 1)
        assert Run.objects.filter(run_id=run_id).count() == 1


def test_puts_racing_cancels_of_one_call_leave_a_pause_or_none(concurrently):
    """A put that finds no pause inserts one; a cancel may remove a racing put's pause
    before the put locks it: the put then inserts again, never fails."""
    for round_ in range(10):
        call = f"call-{round_}"

        def race(i: int, call: str = call):
            if i % 2:
                try:
                    return pauses.cancel("chat", call)
                except (NotPending, PauseNotFound):
                    return None
            return pauses.put("chat", call, "alice", {"i": i})

        results = concurrently(8, race)
        errors = [r for r in results if isinstance(r, BaseException)]
        assert errors == []
        questions = {r for r in results if isinstance(r, str)}
        left = PausedRun.objects.filter(tool_call_id=call)
        assert left.count() <= 1
        for pause in left:
            assert pause.status == "pending" and str(pause.question_id) in questions


DISTINCT = [("A", "a"), ("café", "cafe"), ("x", "x "), ("ß", "ss"), ("I", "ı")]


@pytest.mark.parametrize("first, second", DISTINCT)
def test_scopes_and_names_compare_exactly(first, second):
    context.put(first, first, 1)
    context.put(second, second, 2)
    context.put(first, second, 3)
    assert context.get(first) == {first: 1, second: 3}
    assert context.get(second) == {second: 2}


@pytest.mark.parametrize("first, second", [("Run-1", "run-1"), ("Run.A", "Run.a")])
def test_run_ids_compare_exactly(first, second):
    runs.create_run(first, {"is": first})
    runs.create_run(second, {"is": second})
    assert runs.get_run(first).context == {"is": first}
    assert runs.get_run(second).context == {"is": second}


@pytest.mark.parametrize("first, second", DISTINCT)
def test_pauses_compare_exactly(first, second):
    question = pauses.put(first, "call", "alice", "first")
    pauses.put(second, "call", "alice", "second")
    assert pauses.claim(first, "call", "alice", question) == "first"
    assert PausedRun.objects.get(chat_id=second).status == "pending"
