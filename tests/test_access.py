"""Who reaches what over REST (SPEC section 5, "Access"), as one matrix.

Each ``Case`` is an endpoint acting on an object of alice's: what the owner,
a stranger, a stranger naming alice as ``owner``, and holders of each model
permission get. A stranger never sees alice's data (her values carry a
marker the response must not hold) and never changes it (her rows are
compared before and after). Anonymous callers are checked on every
operation of the schema, so new endpoints are covered automatically.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Permission
from django.db.models import Q
from rest_framework.test import APIClient

from agentstate.models import (
    ApprovalCall, ApprovalRecord, ApprovalRequest, Element, PausedRun, Run, Scope, Variable,
)
from agentstate.services import context, pauses

from .hardening import fill_path, operations

pytestmark = pytest.mark.django_db

SECRET = "alice-secret"
OWNER = object()  # a marker: "name alice as owner" in the request


def user(django_user_model, name: str, *codenames: str):
    person = django_user_model.objects.create(username=name)
    for codename in codenames:
        person.user_permissions.add(Permission.objects.get(content_type__app_label="agentstate", codename=codename))
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
        "variables": list(Variable.objects.filter(scope__owner=person).values("name", "value", "version", "head", "tail")),
        "elements": list(Element.objects.filter(variable__scope__owner=person).values("position", "value")),
        "pauses": list(PausedRun.objects.filter(Q(created_by=person) | Q(owner=person.username)).values()),
        "runs": list(Run.objects.filter(created_by=person).values()),
        "requests": list(ApprovalRequest.objects.filter(created_by=person).values()),
        "records": list(ApprovalRecord.objects.filter(run__created_by=person).values()),
        "calls": list(ApprovalCall.objects.filter(record__run__created_by=person).values()),
    }


@dataclass
class Case:
    """One endpoint on alice's object; ``data`` gets ``owner`` added for OWNER roles."""

    id: str
    method: str
    path: str
    data: Callable[[dict], dict]
    ok: int
    view_perm: str = ""  # lets a holder read alice's object (naming her)
    change_perm: tuple[str, ...] = ()  # let a holder change it (naming her)
    stranger: int = 404
    setup: Callable[[Any], dict] = field(default=lambda alice: {})
    query: bool = False  # data goes in the query string
    lists: bool = False  # a list endpoint: strangers get an empty page
    reveals: bool = True  # a success shows alice's data
    names_owner: bool = True  # takes ``owner`` naming whose object to act on
    change_shows: bool = False  # the change permission also shows every object (as in Django's admin)

    def send(self, person, ctx: dict, name_owner: bool):
        data = dict(self.data({**ctx, "me": person.username}))
        if name_owner:
            data["owner"] = "alice"
        api = client(person)
        if self.method == "get":
            return api.get(self.path, data)
        if self.query:
            return api.generic(self.method.upper(), f"{self.path}?{urlencode(data)}")
        return getattr(api, self.method)(self.path, data, format="json")


def with_scope(alice) -> dict:
    context.put("s", "v", SECRET, owner=alice)
    context.push("s", "l", SECRET, owner=alice)
    return {}


def with_pause(alice) -> dict:
    return {"question_id": pauses.put("chat", "call", "alice", {"secret": SECRET}, user=alice)}


def with_claimed_pause(alice) -> dict:
    ctx = with_pause(alice)
    pauses.claim("chat", "call", "alice", ctx["question_id"], user=alice)
    return ctx


PAUSE = {"chat_id": "chat", "tool_call_id": "call"}

CASES = [
    Case("context-get", "get", "/api/context/", lambda c: {"scope": "s"}, 200, "view_scope", (), setup=with_scope),
    Case("context-put", "put", "/api/context/", lambda c: {"scope": "s", "name": "v", "value": 1}, 200,
         "", ("change_scope",), stranger=200, setup=with_scope, reveals=False),
    Case("context-delete", "delete", "/api/context/", lambda c: {"scope": "s", "name": "v"}, 204,
         "", ("change_scope",), setup=with_scope, query=True, reveals=False),
    Case("context-push", "post", "/api/context/push/", lambda c: {"scope": "s", "name": "l", "value": 1}, 200,
         "", ("change_scope",), stranger=200, setup=with_scope, reveals=False),
    Case("context-pop", "post", "/api/context/pop/", lambda c: {"scope": "s", "name": "l"}, 200,
         "", ("change_scope",), setup=with_scope),
    Case("scopes-list", "get", "/api/scopes/", lambda c: {}, 200, "view_scope", (), stranger=200,
         setup=with_scope, lists=True, reveals=False),
    Case("scopes-delete", "delete", "/api/scopes/", lambda c: {"scope": "s"}, 204, "", ("change_scope",),
         setup=with_scope, query=True, reveals=False),
    Case("pauses-list", "get", "/api/pauses/", lambda c: {}, 200, "view_pausedrun", (), stranger=200,
         setup=with_pause, lists=True, names_owner=False, change_shows=True),  # its ``owner`` is a filter
    Case("pauses-put", "post", "/api/pauses/", lambda c: {**PAUSE, "payload": 1, "owner": c["me"]}, 201,
         "", ("add_pausedrun", "change_pausedrun"), setup=with_pause, reveals=False),
    Case("pauses-claim", "post", "/api/pauses/claim/", lambda c: {**PAUSE, "question_id": c["question_id"]}, 200,
         "", ("change_pausedrun",), setup=with_pause),
    Case("pauses-resolve", "post", "/api/pauses/resolve/", lambda c: PAUSE, 200, "", ("change_pausedrun",),
         setup=with_claimed_pause, names_owner=False),
    Case("pauses-cancel", "post", "/api/pauses/cancel/", lambda c: PAUSE, 204, "", ("change_pausedrun",),
         setup=with_pause, reveals=False, names_owner=False),
    Case("events-list", "get", "/api/events/", lambda c: {}, 200, "view_pausedrun", (), stranger=200,
         setup=with_pause, lists=True, reveals=False, names_owner=False),
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
    covered = {(case.method, case.path) for case in CASES}
    public = {"/api/schema/", "/api/docs/"}
    missing = [op.id for op in operations() if (op.method, op.path) not in covered and op.path not in public]
    assert not missing, f"no access case for {missing}"


@pytest.mark.parametrize("op", operations(), ids=[op.id for op in operations()])
@pytest.mark.parametrize("credentials", [None, "Token not-a-token", "Basic bm9ib2R5Om5vcGU="])
def test_anonymous_or_bad_credentials_answer_401(op, credentials, alice):
    before = owned_by(alice)
    api = APIClient()
    if credentials:
        api.credentials(HTTP_AUTHORIZATION=credentials)
    response = getattr(api, op.method)(fill_path(op.path, {"run_id": "r1", "id": 1, "pk": 1}), {}, format="json")
    assert response.status_code == 401, (response.status_code, response.content)
    assert response.json()["code"] == "not_authenticated" and response.has_header("WWW-Authenticate")
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
def test_naming_another_owner_without_the_permission_is_403_and_changes_nothing(case, alice, stranger):
    ctx = case.setup(alice)
    before = owned_by(alice)
    response = case.send(stranger, ctx, name_owner=True)
    assert response.status_code == 403 and response.json()["code"] == "permission_denied", response.content
    assert SECRET not in response.content.decode()
    assert owned_by(alice) == before


def permission_roles():
    """(case, codenames held, expected status, whether alice's data may change)."""
    roles = []
    for case in CASES:
        perms = [case.view_perm] if case.view_perm else list(case.change_perm)
        roles.append((case, tuple(perms), case.ok))
        # Holding the other kind of permission does not help.
        other = "change_" + case.view_perm.split("_", 1)[1] if case.view_perm else "view_" + perms[-1].split("_", 1)[1]
        roles.append((case, (other,), 200 if case.lists else 403 if case.names_owner else 404))
    return roles


@pytest.mark.parametrize(
    ("case", "perms", "expected"), permission_roles(),
    ids=[f"{c.id}-{'+'.join(p)}" for c, p, _ in permission_roles()],
)
def test_model_permission_reaches_every_users_object(case, perms, expected, alice, django_user_model):
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
        response = api.put("/api/context/", {"scope": "s", "name": "n", "value": 1, "owner": "nobody"}, format="json")
    assert response.status_code == 400 and response.json()["field"] == "owner"
    assert not Scope.objects.exists()


def test_naming_another_owner_is_403_whether_or_not_the_scope_exists(alice, stranger):
    api = client(stranger)
    for scope in ("s", "missing"):
        response = api.get("/api/context/", {"scope": scope, "owner": "alice"})
        assert response.status_code == 403 and response.json()["code"] == "permission_denied"


def test_another_users_pause_and_a_missing_one_answer_alike(alice, stranger):
    ctx = with_pause(alice)
    api = client(stranger)
    theirs = api.post("/api/pauses/claim/", {**PAUSE, "question_id": ctx["question_id"]}, format="json")
    missing = api.post("/api/pauses/claim/", {"chat_id": "none", "tool_call_id": "none",
                                              "question_id": ctx["question_id"]}, format="json")
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["code"] == missing.json()["code"] == "pause_not_found"
