"""Who reaches what over REST (docs/rest-api.md, "Access"), as one matrix.

Each ``Case`` is an endpoint acting on an object of alice's: what the owner,
a stranger, a stranger naming alice as ``owner``, and holders of each model
permission get. A stranger never sees alice's data (her values carry a
marker the response must not hold) and never changes it (her rows are
compared before and after). Anonymous callers are checked on every
operation of the schema, so new endpoints are covered automatically.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Permission
from django.db.models import Q
from rest_framework.test import APIClient

from agentstate.models import (
    ApprovalCall,
    ApprovalRecord,
    ApprovalRequest,
    Budget,
    Element,
    PausedRun,
    Run,
    Scope,
    Variable,
)
from agentstate.services import approvals, budgets, context, oversight, pauses, runs
from agentstate.types import arguments_digest
from tests.hardening import fill_path, operations

pytestmark = pytest.mark.django_db

SECRET = "alice-secret"
OWNER = object()  # a marker: "name alice as owner" in the request


def user(django_user_model, name: str, *codenames: str):
    person = django_user_model.objects.create(username=name)
    for codename in codenames:
        person.user_permissions.add(
            Permission.objects.get(content_type__app_label="agentstate", codename=codename)
        )
    return django_user_model.objects.get(pk=person.pk)  # fresh permission cache


def client(person) -> APIClient:
    api = APIClient()
    if person is not None:
        api.force_authenticate(person)
    return api


def owned_by(person) -> dict[str, list]:
    """Every row of ``person``'s objects, to prove a request changed none."""
    return {
        "scopes": list(Scope.objects.filter(owner=person).values()),
        "variables": list(
            Variable.objects.filter(scope__owner=person).values(
                "name", "value", "version", "head", "tail"
            )
        ),
        "elements": list(
            Element.objects.filter(variable__scope__owner=person).values("position", "value")
        ),
        "pauses": list(
            PausedRun.objects.filter(Q(created_by=person) | Q(owner=person.username)).values()
        ),
        "runs": list(Run.objects.filter(created_by=person).values()),
        "requests": list(ApprovalRequest.objects.filter(created_by=person).values()),
        "records": list(ApprovalRecord.objects.filter(run__created_by=person).values()),
        "calls": list(ApprovalCall.objects.filter(record__run__created_by=person).values()),
        "budgets": list(Budget.objects.filter(Q(user=person) | Q(run__created_by=person)).values()),
    }


@dataclass
class Case:
    """One endpoint on alice's object; ``data`` gets ``owner`` added for OWNER roles."""

    id: str
    method: str
    path: str
    data: dict | Callable[[dict], dict]  # a callable: of the setup's values and ``me``
    ok: int
    view_perm: str = ""  # lets a holder read alice's object (naming her)
    change_perm: tuple[str, ...] = ()  # let a holder change it (naming her)
    stranger: int = 404
    setup: Callable[[Any], dict] = field(default=lambda alice: {})
    query: bool = False  # data goes in the query string
    lists: bool = False  # a list endpoint: strangers get an empty page
    reveals: bool = True  # a success shows alice's data
    names_owner: bool = True  # takes ``owner`` naming whose object to act on
    change_shows: bool = (
        False  # the change permission also shows every object (as in Django's admin)
    )
    roles: bool = True  # some model permission widens its reach (not so for creating a run)

    def send(self, person, ctx: dict, name_owner: bool):
        data = dict(self.data({**ctx, "me": person.username}) if callable(self.data) else self.data)
        if name_owner:
            data["owner"] = "alice"
        api = client(person)
        path = fill_path(self.path, ctx)
        if self.method == "get":
            return api.get(path, data)
        if self.query:
            return api.generic(self.method.upper(), f"{path}?{urlencode(data)}")
        return getattr(api, self.method)(path, data, format="json")


def with_scope(alice) -> dict:
    context.put("s", "v", SECRET, owner=alice)
    context.push("s", "l", SECRET, owner=alice)
    return {}


def with_pause(alice) -> dict:
    return {"question_id": pauses.put("chat", "call", "alice", {"secret": SECRET}, by=alice)}


def with_claimed_pause(alice) -> dict:
    ctx = with_pause(alice)
    pauses.claim("chat", "call", "alice", ctx["question_id"], by=alice)
    return ctx


def with_run(alice) -> dict:
    run = runs.create_run("alice-run", {"note": SECRET}, user=alice)
    runs.approve(run, "tool", SECRET, by=alice)
    request = approvals.request_approval(run, "tool", "call-2", {"note": SECRET}, by=alice)
    return {"run_id": run.run_id, "id": request.pk}


def with_approved_call(alice) -> dict:
    ctx = with_run(alice)
    request = approvals.request_approval(
        ctx["run_id"], "tool", "call-9", {"note": SECRET}, by=alice
    )
    approvals.decide(request, "approve", by=alice)
    return ctx


PAUSE = {"chat_id": "chat", "tool_call_id": "call"}
CALL = {"tool_name": "tool", "call_id": "call-3"}
RUN = "/api/runs/{run_id}/"
CONSUMED = {
    "tool_name": "tool",
    "call_id": "call-9",
    "arguments_digest": arguments_digest({"note": SECRET}),
}

# The cases of one kind of object, with what they share.
on_scope = partial(Case, setup=with_scope)
on_pause = partial(Case, change_perm=("change_pausedrun",), setup=with_pause)
on_run = partial(Case, setup=with_run, names_owner=False)
changes_scope = partial(on_scope, change_perm=("change_scope",), reveals=False)
changes_run = partial(on_run, change_perm=("change_run",))

CASES = [
    on_scope("context-get", "get", "/api/context/", {"scope": "s"}, 200, "view_scope"),
    on_scope(
        "context-list",
        "get",
        "/api/context/list/",
        {"scope": "s", "name": "l", "last": 1},
        200,
        "view_scope",
    ),
    changes_scope(
        "context-put",
        "put",
        "/api/context/",
        {"scope": "s", "name": "v", "value": 1},
        200,
        stranger=200,
    ),
    changes_scope(
        "context-delete", "delete", "/api/context/", {"scope": "s", "name": "v"}, 204, query=True
    ),
    changes_scope(
        "context-push",
        "post",
        "/api/context/push/",
        {"scope": "s", "name": "l", "value": 1},
        200,
        stranger=200,
    ),
    changes_scope(
        "context-pop", "post", "/api/context/pop/", {"scope": "s", "name": "l"}, 200, reveals=True
    ),
    on_scope(
        "scopes-list",
        "get",
        "/api/scopes/",
        {},
        200,
        "view_scope",
        stranger=200,
        lists=True,
        reveals=False,
    ),
    changes_scope("scopes-delete", "delete", "/api/scopes/", {"scope": "s"}, 204, query=True),
    # its ``owner`` is a filter
    on_pause(
        "pauses-list",
        "get",
        "/api/pauses/",
        {},
        200,
        "view_pausedrun",
        change_perm=(),
        stranger=200,
        lists=True,
        names_owner=False,
        change_shows=True,
    ),
    on_pause(
        "pauses-put",
        "post",
        "/api/pauses/",
        lambda c: {**PAUSE, "payload": 1, "owner": c["me"]},
        201,
        change_perm=("add_pausedrun", "change_pausedrun"),
        reveals=False,
    ),
    on_pause(
        "pauses-claim",
        "post",
        "/api/pauses/claim/",
        lambda c: {**PAUSE, "question_id": c["question_id"]},
        200,
    ),
    on_pause(
        "pauses-resolve",
        "post",
        "/api/pauses/resolve/",
        PAUSE,
        200,
        setup=with_claimed_pause,
        names_owner=False,
    ),
    on_pause(
        "pauses-cancel", "post", "/api/pauses/cancel/", PAUSE, 204, reveals=False, names_owner=False
    ),
    on_run(
        "runs-create",
        "post",
        "/api/runs/",
        lambda c: {"run_id": f"{c['me']}-new"},
        201,
        stranger=201,
        reveals=False,
        roles=False,
    ),
    on_run("runs-get", "get", RUN, {}, 200, "view_run", change_shows=True),
    changes_run("runs-patch", "patch", RUN, {"context": {"new": 1}}, 200, reveals=False),
    changes_run("runs-usage", "post", RUN + "usage/", {"requests": 1}, 200, reveals=False),
    on_run("approvals-get", "get", RUN + "approvals/", {}, 200, "view_run", change_shows=True),
    changes_run("approvals-rebuild", "put", RUN + "approvals/", {}, 200, reveals=False),
    changes_run("approvals-approve", "post", RUN + "approvals/approve/", CALL, 200),
    changes_run(
        "approvals-consume",
        "post",
        RUN + "approvals/consume/",
        CONSUMED,
        200,
        setup=with_approved_call,
    ),
    changes_run("approvals-reject", "post", RUN + "approvals/reject/", CALL, 200),
    changes_run(
        "run-approval-requests", "post", RUN + "approval-requests/", CALL, 201, reveals=False
    ),
    on_run(
        "approval-requests-list",
        "get",
        "/api/approval-requests/",
        {},
        200,
        "view_approvalrequest",
        stranger=200,
        lists=True,
    ),
    on_run(
        "approval-requests-get",
        "get",
        "/api/approval-requests/{id}/",
        {},
        200,
        "view_approvalrequest",
    ),
    Case(
        "events-list",
        "get",
        "/api/events/",
        {},
        200,
        "view_pausedrun",
        stranger=200,
        setup=with_pause,
        lists=True,
        reveals=False,
        names_owner=False,
    ),
]
by_case = pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
NAMING = [case for case in CASES if case.names_owner]


@pytest.fixture
def alice(django_user_model):
    return user(django_user_model, "alice")


@pytest.fixture
def stranger(django_user_model):
    return user(django_user_model, "mallory")


def test_every_endpoint_has_an_access_case():
    """An endpoint added to the API must be added to ``CASES`` (or to the exceptions here)."""
    covered = {(case.method, case.path) for case in CASES} | {
        ("post", DECIDE),
        *WEBHOOK_OPS,
        *BUDGET_OPS,
        *POLICY_OPS,
        # A stream without end: the same visibility as events-list (tests/waiting/test_stream.py).
        ("get", "/api/events/stream/"),
        *RULE_OPS,
    }
    public = {"/api/schema/", "/api/docs/"}
    missing = [
        op.id
        for op in operations()
        if (op.method, op.path) not in covered and op.path not in public
    ]
    assert not missing, f"no access case for {missing}"


@pytest.mark.parametrize("op", operations(), ids=[op.id for op in operations()])
@pytest.mark.parametrize("credentials", [None, "Token not-a-token", "Basic bm9ib2R5Om5vcGU="])
def test_anonymous_or_bad_credentials_answer_401(op, credentials, alice):
    before = owned_by(alice)
    api = APIClient()
    if credentials:
        api.credentials(HTTP_AUTHORIZATION=credentials)
    response = getattr(api, op.method)(
        fill_path(op.path, {"run_id": "r1", "id": 1, "pk": 1, "username": "alice"}),
        {},
        format="json",
    )
    assert response.status_code == 401, (response.status_code, response.content)
    assert response.json()["code"] == "not_authenticated" and response.has_header(
        "WWW-Authenticate"
    )
    assert owned_by(alice) == before


@by_case
def test_owner_reaches_its_object(case, alice):
    ctx = case.setup(alice)
    response = case.send(alice, ctx, name_owner=False)
    assert response.status_code == case.ok, response.content
    if case.reveals:
        assert SECRET in response.content.decode()
    if case.lists:
        assert response.json()["count"] >= 1


@by_case
def test_stranger_gets_404_never_the_data_and_changes_nothing(case, alice, stranger):
    ctx = case.setup(alice)
    before = owned_by(alice)
    response = case.send(stranger, ctx, name_owner=False)
    assert response.status_code == case.stranger, response.content
    assert SECRET not in response.content.decode()
    if case.stranger == 404:
        assert response.json()["code"].endswith("not_found")
    if case.lists:
        assert response.json()["count"] == 0 and response.json()["results"] == []
    assert owned_by(alice) == before


@pytest.mark.parametrize("case", NAMING, ids=[case.id for case in NAMING])
def test_naming_another_owner_without_the_permission_is_403_and_changes_nothing(
    case, alice, stranger
):
    ctx = case.setup(alice)
    before = owned_by(alice)
    response = case.send(stranger, ctx, name_owner=True)
    assert response.status_code == 403 and response.json()["code"] == "permission_denied", (
        response.content
    )
    assert SECRET not in response.content.decode()
    assert owned_by(alice) == before


def permission_roles():
    """(case, codenames held, expected status, whether alice's data may change)."""
    roles = []
    for case in CASES:
        if not case.roles:
            continue
        perms = [case.view_perm] if case.view_perm else list(case.change_perm)
        roles.append((case, tuple(perms), case.ok))
        # Holding the other kind of permission does not help (except where changing shows too).
        other = (
            "change_" + case.view_perm.split("_", 1)[1]
            if case.view_perm
            else "view_" + perms[-1].split("_", 1)[1]
        )
        refused = 200 if case.lists else 403 if case.names_owner else 404
        roles.append((case, (other,), case.ok if case.change_shows and not case.lists else refused))
    return roles


@pytest.mark.parametrize(
    ("case", "perms", "expected"),
    permission_roles(),
    ids=[f"{c.id}-{'+'.join(p)}" for c, p, _ in permission_roles()],
)
def test_model_permission_reaches_every_users_object(
    case, perms, expected, alice, django_user_model
):
    ctx = case.setup(alice)
    holder = user(django_user_model, "holder", *perms)
    before = owned_by(alice)
    response = case.send(holder, ctx, name_owner=case.names_owner and not case.lists)
    assert response.status_code == expected, (perms, response.content)
    reaches = expected == case.ok and bool(
        (case.view_perm and case.view_perm in perms)
        or (case.change_perm and set(case.change_perm) <= set(perms))
        or (case.change_shows and any(p.startswith("change_") for p in perms))
    )
    if case.lists:
        assert (response.json()["count"] >= 1) == reaches, response.json()
    elif reaches and case.reveals:
        assert SECRET in response.content.decode()
    if not reaches:
        assert SECRET not in response.content.decode()
        assert owned_by(alice) == before


@pytest.mark.parametrize("codename", ["view_scope", "change_scope"])
def test_naming_an_unknown_owner_with_the_permission_is_400(codename, django_user_model):
    holder = user(django_user_model, "holder", codename)
    api = client(holder)
    if codename == "view_scope":
        response = api.get("/api/context/", {"scope": "s", "owner": "nobody"})
    else:
        response = api.put(
            "/api/context/",
            {"scope": "s", "name": "n", "value": 1, "owner": "nobody"},
            format="json",
        )
    assert response.status_code == 400 and response.json()["field"] == "owner"
    assert not Scope.objects.exists()


@pytest.mark.parametrize("scope", ["s", "missing"])
def test_naming_another_owner_is_403_whether_or_not_the_scope_exists(scope, alice, stranger):
    response = client(stranger).get("/api/context/", {"scope": scope, "owner": "alice"})
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"


def test_another_users_pause_and_a_missing_one_answer_alike(alice, stranger):
    ctx = with_pause(alice)
    api = client(stranger)
    theirs = api.post(
        "/api/pauses/claim/", {**PAUSE, "question_id": ctx["question_id"]}, format="json"
    )
    missing = api.post(
        "/api/pauses/claim/",
        {"chat_id": "none", "tool_call_id": "none", "question_id": ctx["question_id"]},
        format="json",
    )
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["code"] == missing.json()["code"] == "pause_not_found"


DECIDE = "/api/approval-requests/{id}/decide/"


@pytest.mark.parametrize(
    "perms", [(), ("view_approvalrequest",), ("change_approvalrequest",), ("change_run",)]
)
@pytest.mark.parametrize("who", ["owner", "other"])
def test_deciding_without_the_permission_is_403_even_for_ones_own_request(
    who, perms, alice, django_user_model
):
    ctx = with_run(alice)
    person = alice if who == "owner" and not perms else user(django_user_model, "holder", *perms)
    before = owned_by(alice)
    response = client(person).post(fill_path(DECIDE, ctx), {"decision": "approve"}, format="json")
    assert response.status_code == 403 and response.json()["code"] == "permission_denied", (
        response.content
    )
    assert SECRET not in response.content.decode()
    assert owned_by(alice) == before


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_reviewer_decides_every_users_request(decision, alice, django_user_model):
    ctx = with_run(alice)
    reviewer = user(django_user_model, "reviewer", "decide_approvalrequest")
    response = client(reviewer).post(fill_path(DECIDE, ctx), {"decision": decision}, format="json")
    assert response.status_code == 200, response.content
    assert (
        response.json()["status"] == {"approve": "approved", "reject": "rejected"}[decision]
        and response.json()["decided_by"] == "reviewer"
    )
    missing = client(reviewer).post(
        fill_path(DECIDE, {"id": ctx["id"] + 1000}), {"decision": decision}, format="json"
    )
    assert missing.status_code == 404 and missing.json()["code"].endswith("not_found")


def test_creating_a_run_under_another_users_id_is_409_and_changes_nothing(alice, stranger):
    ctx = with_run(alice)
    before = owned_by(alice)
    response = client(stranger).post(
        "/api/runs/", {"run_id": ctx["run_id"], "context": {"x": 1}}, format="json"
    )
    assert response.status_code == 409 and response.json()["code"] == "run_exists"
    assert SECRET not in response.content.decode()
    assert owned_by(alice) == before


# Webhooks belong to the site, not to a user: every endpoint takes agentstate.change_webhook.
WEBHOOK_OPS = {
    ("get", "/api/webhooks/"),
    ("post", "/api/webhooks/"),
    ("delete", "/api/webhooks/{id}/"),
    ("get", "/api/webhooks/{id}/deliveries/"),
}


@pytest.mark.parametrize("method, path", sorted(WEBHOOK_OPS))
def test_every_webhook_endpoint_takes_change_webhook(
    method, path, alice, django_user_model, settings
):
    from agentstate.models import Webhook
    from agentstate.services import webhooks

    settings.AGENTSTATE = {"WEBHOOK_ALLOW_PRIVATE": True}
    hook = webhooks.create_webhook("http://127.0.0.1:9/hook")
    body = {"url": "http://127.0.0.1:9/other"} if method == "post" else {}
    url = fill_path(path, {"id": hook.pk})
    for person, status in (
        (user(django_user_model, "stranger"), 403),
        (user(django_user_model, "manager", "change_webhook"), None),
    ):
        response = getattr(client(person), method)(url, body, format="json")
        if status == 403:
            assert response.status_code == 403, response.content
            assert response.json()["code"] == "permission_denied"
            assert list(Webhook.objects.values_list("pk", flat=True)) == [hook.pk]
        else:
            assert response.status_code in (200, 201, 204), response.content


# Budgets: reading a run's takes seeing the run (or a budget permission), reading a
# user's is one's own or takes view_budget / change_budget; setting either takes
# change_budget, even one's own (403 before anything else).
RUN_BUDGET = "/api/runs/{run_id}/budget/"
USER_BUDGET = "/api/users/{username}/budget/"
BUDGET_OPS = {("get", RUN_BUDGET), ("put", RUN_BUDGET), ("get", USER_BUDGET), ("put", USER_BUDGET)}
BUDGET_CAP = 424242  # alice's caps: a marker no refused response may hold

# role: the permissions held ("owner": alice herself) -> expected status per operation
BUDGET_ROLES = {
    "owner": ((), {"get run": 200, "put run": 403, "get user": 200, "put user": 403}),
    "stranger": ((), {"get run": 404, "put run": 403, "get user": 403, "put user": 403}),
    "view_run": (
        ("view_run",),
        {"get run": 200, "put run": 403, "get user": 403, "put user": 403},
    ),
    "change_run": (
        ("change_run",),
        {"get run": 200, "put run": 403, "get user": 403, "put user": 403},
    ),
    "view_budget": (
        ("view_budget",),
        {"get run": 200, "put run": 403, "get user": 200, "put user": 403},
    ),
    "change_budget": (
        ("change_budget",),
        {"get run": 200, "put run": 200, "get user": 200, "put user": 200},
    ),
}


def with_budgets(alice) -> dict:
    ctx = with_run(alice)
    budgets.set_run_budget(ctx["run_id"], {"requests": BUDGET_CAP})
    budgets.set_user_budget(alice, {"total_tokens": BUDGET_CAP}, period="day")
    return {**ctx, "username": "alice"}


@pytest.mark.parametrize("role", sorted(BUDGET_ROLES))
@pytest.mark.parametrize("operation", ["get run", "put run", "get user", "put user"])
def test_who_reads_and_sets_budgets(role, operation, alice, django_user_model):
    ctx = with_budgets(alice)
    perms, expected = BUDGET_ROLES[role]
    person = alice if role == "owner" else user(django_user_model, f"holder-{role}", *perms)
    method, whose = operation.split()
    path = fill_path(RUN_BUDGET if whose == "run" else USER_BUDGET, ctx)
    before = owned_by(alice)
    api = client(person)
    body = {"input_tokens": 7}
    response = api.get(path) if method == "get" else api.put(path, body, format="json")
    status = expected[operation]
    assert response.status_code == status, response.content
    text = response.content.decode()
    if status == 200:
        assert str(BUDGET_CAP) in text or method == "put"
    else:
        assert str(BUDGET_CAP) not in text
        assert response.json()["code"] == (
            "run_not_found" if status == 404 else "permission_denied"
        )
        assert owned_by(alice) == before


@pytest.mark.parametrize("perms, status", [((), 403), (("view_budget",), 404)])
def test_an_unknown_users_budget_is_403_without_the_permission_404_with_it(
    perms, status, django_user_model
):
    person = user(django_user_model, "holder", *perms)
    response = client(person).get(fill_path(USER_BUDGET, {"username": "nobody"}))
    assert response.status_code == status, response.content
    setter = user(django_user_model, "setter", "change_budget")
    put = client(setter).put(fill_path(USER_BUDGET, {"username": "nobody"}), {}, format="json")
    assert (put.status_code, put.json()["code"]) == (404, "user_not_found")
    assert not Budget.objects.exists()


def test_a_budget_setter_reaches_every_run_and_an_unknown_run_is_404(alice, django_user_model):
    ctx = with_budgets(alice)
    setter = user(django_user_model, "setter", "change_budget")
    put = client(setter).put(fill_path(RUN_BUDGET, ctx), {"requests": None}, format="json")
    assert put.status_code == 200 and put.json()["caps"]["requests"] is None
    missing = client(setter).put(fill_path(RUN_BUDGET, {"run_id": "nope"}), {}, format="json")
    assert (missing.status_code, missing.json()["code"]) == (404, "run_not_found")


# Approval policies decide requests of every user: every endpoint takes
# agentstate.decide_approvalrequest, as deciding does, whoever's runs they name.
POLICY_OPS = {
    ("get", "/api/approval-policies/"),
    ("post", "/api/approval-policies/"),
    ("post", "/api/approval-policies/{id}/revoke/"),
}


@pytest.mark.parametrize("method, path", sorted(POLICY_OPS))
@pytest.mark.parametrize(
    "perms",
    [(), ("view_approvalrequest",), ("change_approvalrequest",), ("change_run",), ("view_run",)],
)
def test_every_policy_endpoint_takes_decide_approvalrequest(
    method, path, perms, alice, django_user_model
):
    from agentstate.models import ApprovalPolicy, Event

    policy = approvals.create_policy("tool", "approve", user=alice, reason=SECRET)
    ctx = with_run(alice)
    body = {"tool_name": "tool", "decision": "reject", "user": "alice"} if method == "post" else {}
    url = fill_path(path, {"id": policy.pk})
    policies_before = list(ApprovalPolicy.objects.values())
    events_before = Event.objects.count()
    for person in (alice, user(django_user_model, "holder", *perms)):
        response = getattr(client(person), method)(url, body, format="json")
        assert response.status_code == 403, response.content
        assert response.json()["code"] == "permission_denied"
        assert SECRET not in response.content.decode()
    assert list(ApprovalPolicy.objects.values()) == policies_before
    assert Event.objects.count() == events_before
    assert owned_by(alice)["requests"][0]["id"] == ctx["id"]
    reviewer = user(django_user_model, "reviewer", "decide_approvalrequest")
    response = getattr(client(reviewer), method)(url, body, format="json")
    assert response.status_code in (200, 201), response.content
    if method == "get":
        assert SECRET in response.content.decode()


RULE_OPS = {
    ("get", "/api/approval-rules/"),
    ("post", "/api/approval-rules/"),
    ("get", "/api/approval-rules/{id}/"),
    ("patch", "/api/approval-rules/{id}/"),
    ("delete", "/api/approval-rules/{id}/"),
}


@pytest.mark.parametrize("method, path", sorted(RULE_OPS))
def test_rules_are_read_by_reviewers_and_managed_with_change_approvalrule(
    method, path, alice, django_user_model
):
    from agentstate.models import ApprovalRule, Event

    rule = oversight.create_rule("tool")
    url = fill_path(path, {"id": rule.pk})
    body = {"post": {"tool_name": "other"}, "patch": {"approvals_required": 2}}.get(method, {})
    rules_before = list(ApprovalRule.objects.values())
    events_before = Event.objects.count()
    refused = [alice, user(django_user_model, "runner", "change_run", "view_run")]
    if method != "get":
        refused.append(user(django_user_model, "reviewer", "decide_approvalrequest"))
    for person in refused:
        response = getattr(client(person), method)(url, body, format="json")
        assert response.status_code == 403, response.content
        assert response.json()["code"] == "permission_denied"
    assert list(ApprovalRule.objects.values()) == rules_before
    assert Event.objects.count() == events_before
    allowed = user(django_user_model, "manager", "change_approvalrule")
    response = getattr(client(allowed), method)(url, body, format="json")
    assert response.status_code in (200, 201, 204), response.content
