"""Runs, usage and approval records through the Python API (docs/concepts.md)."""

import uuid

import pytest

from agentstate.exceptions import BadInput, RunExists, RunNotFound
from agentstate.models import ApprovalCall, ApprovalRecord, Event, Run
from agentstate.services import runs
from agentstate.types import Reach

pytestmark = pytest.mark.django_db

ZERO = dict.fromkeys(Run.USAGE_FIELDS, 0)


@pytest.fixture
def run(alice) -> Run:
    return runs.create_run("run-1", {"user": "alice"}, user=alice)


# The precedence of is_tool_approved, case by case.
PRECEDENCE = [
    ("no record", None, None),
    ("permanent approval", {"approved": True, "rejected": []}, True),
    ("permanent rejection", {"approved": False, "rejected": True}, False),
    ("both permanent flags: approval wins", {"approved": True, "rejected": True}, True),
    ("permanent approval over a listed rejection", {"approved": True, "rejected": ["c1"]}, True),
    ("permanent rejection over a listed approval", {"approved": ["c1"], "rejected": True}, False),
    ("call id approved", {"approved": ["c1"], "rejected": []}, True),
    ("call id in both lists: approved wins", {"approved": ["c1"], "rejected": ["c1"]}, True),
    ("call id rejected", {"approved": [], "rejected": ["c1"]}, False),
    ("call id rejected, approved false", {"approved": False, "rejected": ["c1"]}, False),
    ("other call ids only", {"approved": ["c2"], "rejected": ["c3"]}, None),
    ("empty lists", {"approved": [], "rejected": []}, None),
    ("both flags false", {"approved": False, "rejected": False}, None),
]


@pytest.mark.parametrize(
    "record,expected", [case[1:] for case in PRECEDENCE], ids=[case[0] for case in PRECEDENCE]
)
def test_is_tool_approved_follows_the_sdk_precedence(run, record, expected):
    if record is not None:
        runs.rebuild_approvals(run, {"mail": record})
    assert runs.is_tool_approved(run, "mail", "c1") is expected
    assert runs.is_tool_approved(run, "other-tool", "c1") is None


def test_create_run_generates_a_uuid_and_refuses_a_taken_id(alice):
    generated = runs.create_run(user=alice)
    assert uuid.UUID(generated.run_id) and generated.context == {} and generated.created_by == alice
    runs.create_run("a.b:c-d_e")
    with pytest.raises(RunExists):
        runs.create_run("a.b:c-d_e")


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "x" * 129, "sp ace", "é", 5, ["a"]])
def test_create_run_refuses_a_bad_run_id(bad):
    with pytest.raises(BadInput) as caught:
        runs.create_run(bad)
    assert caught.value.field == "run_id"
    assert not Run.objects.exists()


def test_get_and_update_run(run, alice, bob):
    assert runs.get_run("run-1") == run
    with pytest.raises(RunNotFound):
        runs.get_run("nope")
    assert runs.get_run("run-1", reach=Reach(alice.pk, "alice")) == run
    with pytest.raises(RunNotFound):  # outside the reach: like a missing run
        runs.get_run("run-1", reach=Reach(bob.pk, "bob"))
    runs.update_run(run, [1, {"x": None}])
    assert runs.get_run("run-1").context == [1, {"x": None}]


def test_to_json_is_the_resumable_form(run):
    assert runs.to_json(run) == {
        "run_id": "run-1",
        "context": {"user": "alice"},
        "usage": ZERO,
        "approvals": {},
    }


def test_add_usage_accumulates_and_total_defaults_to_input_plus_output(run):
    assert runs.add_usage(run, input_tokens=10, output_tokens=5) == {
        **ZERO,
        "requests": 1,
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
    }
    usage = runs.add_usage(
        run, requests=2, input_tokens=1, total_tokens=100, cached_tokens=3, reasoning_tokens=4
    )
    assert usage == {
        "requests": 3,
        "input_tokens": 11,
        "output_tokens": 5,
        "total_tokens": 115,
        "cached_tokens": 3,
        "reasoning_tokens": 4,
    }
    assert Run.objects.get(pk=run.pk).usage == usage == run.usage


@pytest.mark.parametrize(
    "field,value",
    [
        ("input_tokens", -1),
        ("requests", 1.5),
        ("output_tokens", "3"),
        ("cached_tokens", True),
        ("total_tokens", 2**53 + 1),
        ("reasoning_tokens", None),
    ],
)
def test_add_usage_refuses_bad_increments_and_changes_nothing(run, field, value):
    with pytest.raises(BadInput) as caught:
        runs.add_usage(run, **{field: value})
    assert caught.value.field == field
    assert Run.objects.get(pk=run.pk).usage == ZERO


def test_an_increment_of_exactly_2_53_is_accepted(run):
    assert (
        runs.add_usage(run, requests=0, input_tokens=2**53, total_tokens=0)["input_tokens"] == 2**53
    )


def test_per_call_decisions_append_to_lists(run, bob):
    assert runs.approve(run, "mail", "c1", by=bob, reason="looks fine") == {
        "mail": {"approved": ["c1"], "rejected": []}
    }
    runs.approve(run, "mail", "c1")  # once only
    assert runs.reject(run, "mail", "c2") == {"mail": {"approved": ["c1"], "rejected": ["c2"]}}
    call = ApprovalCall.objects.get(call_id="c1")
    assert (call.decision, call.decided_by, call.reason) == ("approve", bob, "looks fine")
    assert call.created_at is not None
    assert [runs.is_tool_approved(run, "mail", c) for c in ("c1", "c2", "c3")] == [
        True,
        False,
        None,
    ]


def test_always_approve_clears_rejections(run):
    runs.reject(run, "mail", "c1")
    runs.reject(run, "mail", "c2", always=True)
    assert runs.approve(run, "mail", "c3", always=True) == {
        "mail": {"approved": True, "rejected": []}
    }
    assert not ApprovalCall.objects.exists()
    assert runs.is_tool_approved(run, "mail", "c1") is True


def test_always_reject_clears_approvals(run):
    runs.approve(run, "mail", "c1")
    runs.approve(run, "mail", "c2", always=True)
    assert runs.reject(run, "mail", "c3", always=True) == {
        "mail": {"approved": False, "rejected": True}
    }
    assert not ApprovalCall.objects.exists()
    assert runs.is_tool_approved(run, "mail", "c1") is False


def test_a_permanent_decision_is_not_overridden_per_call(run):
    runs.approve(run, "mail", "c0", always=True)
    assert runs.reject(run, "mail", "c1") == {"mail": {"approved": True, "rejected": ["c1"]}}
    assert runs.is_tool_approved(run, "mail", "c1") is True
    runs.reject(run, "shell", "c0", always=True)
    assert runs.approve(run, "shell", "c1")["shell"] == {"approved": False, "rejected": True}
    assert runs.is_tool_approved(run, "shell", "c1") is False


def test_approve_and_reject_record_events(run, bob):
    runs.approve(run, "mail", "c1", by=bob)
    runs.reject(run, "mail", "c2", always=True)
    kinds = list(Event.objects.order_by("pk").values_list("kind", "object_id", "actor", "details"))
    assert kinds == [
        (
            "approvals.changed",
            "run-1",
            "bob",
            {
                "tool_name": "mail",
                "call_id": "c1",
                "decision": "approve",
                "always": False,
                "reason": "",
            },
        ),
        (
            "approvals.changed",
            "run-1",
            "",
            {
                "tool_name": "mail",
                "call_id": "c2",
                "decision": "reject",
                "always": True,
                "reason": "",
            },
        ),
    ]


@pytest.mark.parametrize(
    "call",
    [
        lambda run: runs.approve(run, "", "c1"),
        lambda run: runs.approve(run, "mail", "x" * 256),
        lambda run: runs.reject(run, "mail", "c1", always="yes"),
        lambda run: runs.reject(run, "mail\x00", "c1"),
    ],
)
def test_approve_and_reject_refuse_bad_input(run, call):
    with pytest.raises(BadInput):
        call(run)
    assert not ApprovalRecord.objects.exists() and not Event.objects.exists()


def test_rebuild_and_to_json_round_trip(run):
    records = {
        "mail": {"approved": ["c1", "c2"], "rejected": ["c3"]},
        "shell": {"approved": False, "rejected": True},
        "search": {"approved": True, "rejected": []},
        "both": {"approved": ["x"], "rejected": ["x"]},
    }
    runs.add_usage(run, input_tokens=3)
    assert runs.rebuild_approvals(run, records) == records
    stored = runs.to_json(run)
    assert stored["approvals"] == records
    other = runs.create_run("run-2")
    runs.rebuild_approvals(other, stored["approvals"])
    assert runs.to_json(other)["approvals"] == records
    assert Event.objects.filter(kind="approvals.rebuilt", object_id="run-1").count() == 1


def test_rebuild_replaces_everything(run):
    runs.approve(run, "mail", "c1")
    runs.reject(run, "shell", "c1", always=True)
    assert runs.rebuild_approvals(run, {"search": {"approved": ["s1"]}}) == {
        "search": {"approved": ["s1"], "rejected": []}
    }
    assert runs.rebuild_approvals(run, {}) == {}
    assert not ApprovalRecord.objects.exists() and not ApprovalCall.objects.exists()


@pytest.mark.parametrize(
    "records,field",
    [
        ([], "approvals"),
        ({"mail": "yes"}, "mail"),
        ({"mail": {"approved": "yes", "rejected": []}}, "mail.approved"),
        ({"mail": {"approved": [], "rejected": [1]}}, "mail.rejected.0"),
        ({"mail": {"approved": ["ok", ""], "rejected": []}}, "mail.approved.1"),
        ({"mail": {"approved": [], "maybe": []}}, "mail.maybe"),
        ({"": {"approved": [], "rejected": []}}, "tool_name"),
        ({"mail": {"approved": None, "rejected": []}}, "mail.approved"),
    ],
)
def test_rebuild_refuses_a_bad_map_and_keeps_the_old_records(run, records, field):
    runs.approve(run, "mail", "c1")
    before = runs.records(run)
    with pytest.raises(BadInput) as caught:
        runs.rebuild_approvals(
            run,
            {"good": {"approved": True, "rejected": []}, **records}
            if isinstance(records, dict)
            else records,
        )
    assert caught.value.field == field
    assert runs.records(run) == before


def everything() -> list:
    return [
        list(model.objects.values().order_by("pk"))
        for model in (Run, ApprovalRecord, ApprovalCall, Event)
    ]


def test_refusals_leave_nothing_written(run, bob):
    runs.approve(run, "mail", "c1")
    before = everything()
    outside = Reach(bob.pk, "bob")
    refused = [
        (RunExists, lambda: runs.create_run("run-1", {"other": 1}, user=bob)),
        (RunNotFound, lambda: runs.approve(run, "mail", "c2", reach=outside)),
        (RunNotFound, lambda: runs.reject("run-1", "mail", "c2", always=True, reach=outside)),
        (RunNotFound, lambda: runs.rebuild_approvals(run, {}, reach=outside)),
        (RunNotFound, lambda: runs.update_run(run, {"x": 1}, reach=outside)),
        (RunNotFound, lambda: runs.add_usage(run, reach=outside)),
        (RunNotFound, lambda: runs.records(run, reach=outside)),
        (RunNotFound, lambda: runs.is_tool_approved("run-1", "mail", "c1", reach=outside)),
        (RunNotFound, lambda: runs.approve("no such run", "mail", "c1")),
    ]
    for error, call in refused:
        with pytest.raises(error):
            call()
    assert everything() == before


def test_a_usage_total_past_64_bits_adds_nothing(run):
    Run.objects.filter(pk=run.pk).update(output_tokens=2**63 - 5, reasoning_tokens=2**63 - 1)
    with pytest.raises(BadInput) as caught:
        runs.add_usage(run, input_tokens=1, output_tokens=5, reasoning_tokens=1)
    assert caught.value.field == "output_tokens"  # the first counter past the column
    assert Run.objects.get(pk=run.pk).usage == {
        **ZERO,
        "output_tokens": 2**63 - 5,
        "reasoning_tokens": 2**63 - 1,
    }


def test_a_run_id_names_a_run_like_the_run_does(run):
    runs.approve("run-1", "mail", "c1")
    assert runs.records(run) == runs.records("run-1") == runs.to_json("run-1")["approvals"]
    assert runs.add_usage("run-1")["requests"] == 1
    for bad in ("..", "a b", "x\x00", 5):
        with pytest.raises(RunNotFound):
            runs.records(bad)
