"""A hub checks a notice against the waiters it may concern only: each waiter whose
``Wants`` names a field is filed under it, and a notice asks those filed under its
own values and the waiters of no field. 500 waiters of 500 requests: a notice about
one asks one waiter, and wakes the right ones."""

import asyncio
import contextlib

from agentstate.services import wakeups
from agentstate.services.waiting import events_notice, request_notice, run_notice


class Counted(wakeups.Wants):
    """A ``Wants`` that counts how often it is asked."""

    asked = 0

    def __call__(self, notice):
        type(self).asked += 1
        return super().__call__(notice)


def notice(object_type="approvalrequest", object_id="7", run_id="run-1", kind="approval.decided"):
    return wakeups.Notice(1, kind, object_type, object_id, run_id)


async def woken(wants: list, sent: wakeups.Notice | None) -> list[bool]:
    hub = wakeups.Hub()
    hub._start = lambda: None  # no listening nor polling: notices are handed in
    with contextlib.ExitStack() as stack:
        waiters = [stack.enter_context(hub.waiter(w)) for w in wants]
        hub.dispatch(sent)
        answer = [w.woken.is_set() for w in waiters]
    assert not hub.waiters and not hub.filed and not hub.unfiled
    return answer


def test_a_notice_asks_the_waiters_filed_under_it_only():
    Counted.asked = 0
    wants = [Counted(request_notice(pk).fields) for pk in range(500)]
    assert asyncio.run(woken(wants, notice(object_id="7"))) == [pk == 7 for pk in range(500)]
    assert Counted.asked == 1


def test_each_kind_of_waiter_is_woken_by_what_it_wants():
    wants = [
        request_notice(7),
        request_notice(8),
        run_notice("run-1"),
        run_notice("run-2"),
        events_notice({}, None),  # every event
        events_notice({"kind": "approval.decided"}, None),
        events_notice({"kind": "approval.requested"}, None),
        events_notice({"object_type": "approvalrequest"}, "run-1"),
        events_notice({"object_type": "approvalrequest"}, "run-2"),
        lambda n: n.object_id == "7",  # a callable of its own: asked every time
    ]
    expected = [True, False, True, False, True, True, False, True, False, True]
    assert asyncio.run(woken(wants, notice())) == expected
    # a notice without a run, of another object
    assert asyncio.run(woken(wants, notice("pausedrun", "c/1", None, "pause.put"))) == [
        False,
        False,
        False,
        False,
        True,
        False,
        False,
        False,
        False,
        False,
    ]
    # something may have been missed: every waiter looks again
    assert asyncio.run(woken(wants, wakeups.ANYTHING)) == [True] * len(wants)
