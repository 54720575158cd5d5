"""Compound context operations are atomic under real concurrency.

Threads with their own connections, started together by a barrier, on
PostgreSQL and on the SQLite file. Any exception a worker meets (a
"database is locked" included) is returned by ``concurrently`` and fails
the test.
"""

import threading
import time
from collections import Counter

import pytest
from django.db import connection, transaction

from agentstate.exceptions import VariableNotFound
from agentstate.models import Element, Variable
from agentstate.services import context

pytestmark = pytest.mark.django_db(transaction=True)

WORKERS = 20


def no_errors(results: list) -> list:
    errors = [result for result in results if isinstance(result, BaseException)]
    assert not errors, f"{len(errors)} workers failed, first: {errors[0]!r}"
    return results


def test_20_workers_x_100_pushes_leave_exactly_2000_elements(concurrently):
    def work(i: int) -> list[int]:
        return [context.push("s", "list", f"{i}-{n}").length for n in range(100)]

    lengths = no_errors(concurrently(WORKERS, work))
    variable = Variable.objects.get(scope__key="s", name="list")
    assert variable.length == 2000 and variable.version == 2000
    values = context.get("s", ["list"])["list"]
    assert sorted(values) == sorted(f"{i}-{n}" for i in range(WORKERS) for n in range(100))
    # Each push saw a distinct length, and each worker's pushes keep their order.
    assert sorted(length for worker in lengths for length in worker) == list(range(1, 2001))
    for i in range(WORKERS):
        mine = [value for value in values if value.startswith(f"{i}-")]
        assert mine == [f"{i}-{n}" for n in range(100)]


def test_concurrent_pushes_to_an_absent_variable_in_an_absent_scope_create_it_once(concurrently):
    results = no_errors(
        concurrently(WORKERS, lambda i: context.push("new-scope", "fresh", i).length)
    )
    assert sorted(results) == list(range(1, WORKERS + 1))
    assert sorted(context.get("new-scope", ["fresh"])["fresh"]) == list(range(WORKERS))
    assert Variable.objects.get(name="fresh").version == WORKERS


@pytest.mark.parametrize("mode", ["LIFO", "FIFO"])
def test_concurrent_pops_return_every_element_exactly_once(concurrently, mode):
    total = 400
    context.put("s", "queue", list(range(total)))

    def work(i: int) -> list:
        popped = []
        while True:
            try:
                popped.append(context.pop("s", "queue", mode))
            except VariableNotFound:
                return popped

    results = no_errors(concurrently(WORKERS, work))
    everything = [value for worker in results for value in worker]
    assert Counter(everything) == Counter(range(total))
    for worker in results:  # each worker saw the list's order
        assert worker == sorted(worker, reverse=(mode == "LIFO"))
    assert not Variable.objects.exists() and not Element.objects.exists()


def test_pushes_racing_pops_lose_and_duplicate_nothing(concurrently):
    context.put("s", "mixed", [])

    def work(i: int) -> list:
        if i % 2 == 0:
            for n in range(50):
                context.push("s", "mixed", f"{i}-{n}")
            return []
        popped = []
        for _ in range(50):
            try:
                popped.append(context.pop("s", "mixed", "FIFO"))
            except VariableNotFound:
                pass  # emptied (and removed) for a moment; a push brings it back
            except Exception as error:  # an empty list left by put([]) is a type conflict
                if getattr(error, "code", "") != "type_conflict":
                    raise
        return popped

    results = no_errors(concurrently(WORKERS, work))
    popped = [value for worker in results for value in worker]
    left = context.get("s", ["mixed"])["mixed"] if Variable.objects.exists() else []
    left = [left] if isinstance(left, str) else left
    pushed = [f"{i}-{n}" for i in range(0, WORKERS, 2) for n in range(50)]
    assert Counter(popped) + Counter(left) == Counter(pushed)


def test_concurrent_puts_with_if_version_let_exactly_one_win(concurrently):
    context.put("s", "cas", 0)

    def work(i: int) -> str:
        try:
            context.put("s", "cas", i, if_version=1)
            return "won"
        except Exception as error:
            if getattr(error, "code", "") == "version_mismatch":
                return "lost"
            raise

    results = no_errors(concurrently(WORKERS, work))
    assert results.count("won") == 1 and results.count("lost") == WORKERS - 1
    assert Variable.objects.get(name="cas").version == 2


def test_concurrent_creation_with_if_version_0_lets_exactly_one_win(concurrently):
    def work(i: int) -> str:
        try:
            context.put("s", "once", i, if_version=0)
            return "won"
        except Exception as error:
            if getattr(error, "code", "") == "version_mismatch":
                return "lost"
            raise

    results = no_errors(concurrently(WORKERS, work))
    assert results.count("won") == 1
    assert Variable.objects.get(name="once").version == 1


@pytest.mark.parametrize("mode, taken, left", [("LIFO", 4, [1, 2, 3]), ("FIFO", 1, [2, 3, 4])])
def test_a_pop_that_waited_for_a_push_sees_the_pushed_element(mode, taken, left):
    """The pop queues on the row lock a push holds; the push commits; the pop then
    takes from the list as the push left it, the pushed element included."""
    for value in (1, 2, 3):
        context.push("s", "list", value)
    pushed, release, popped = threading.Event(), threading.Event(), []

    def push_and_hold() -> None:
        try:
            with transaction.atomic():
                context.push("s", "list", 4)
                pushed.set()
                assert release.wait(30)
        finally:
            connection.close()

    def pop() -> None:
        try:
            popped.append(context.pop("s", "list", mode))
        except BaseException as error:  # noqa: BLE001 - handed to the test
            popped.append(error)
        finally:
            connection.close()

    pusher = threading.Thread(target=push_and_hold)
    pusher.start()
    assert pushed.wait(30)
    popper = threading.Thread(target=pop)
    popper.start()
    wait_until_a_connection_waits_for_a_lock()
    release.set()
    pusher.join(30)
    popper.join(30)
    assert popped == [taken]
    assert context.get("s", ["list"]) == {"list": left}
    variable = Variable.objects.get(name="list")
    assert (variable.length, variable.version) == (3, 5)


def wait_until_a_connection_waits_for_a_lock() -> None:
    """PostgreSQL: until pg_locks shows a lock not granted; SQLite, whose writers
    wait in BEGIN IMMEDIATE and show no such thing: a moment."""
    if connection.vendor != "postgresql":
        time.sleep(0.3)
        return
    deadline = time.monotonic() + 30
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
            if cursor.fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError("no connection waited for a lock")
