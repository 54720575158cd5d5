"""agentstate's TokenAuthentication answers as DRF's does, from one fixed statement."""

import pytest
from rest_framework import authentication
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentstate.api.authentication import TokenAuthentication

pytestmark = pytest.mark.django_db


def by_token(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def test_the_demo_site_uses_it(settings):
    assert settings.REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"][0] == (
        "agentstate.api.authentication.TokenAuthentication"
    )


def test_a_valid_token_authenticates_its_user_with_the_token(alice):
    token = Token.objects.create(user=alice)
    user, auth = TokenAuthentication().authenticate_credentials(token.key)
    assert (user.pk, user.username, user.is_active) == (alice.pk, "alice", True)
    assert user.password == alice.password and not hasattr(user, "agentstate_token_created")
    assert (auth.key, auth.user_id, auth.created) == (token.key, alice.pk, token.created)
    assert by_token(token.key).get("/api/context/?scope=nothing").status_code == 404


@pytest.mark.parametrize("case", ["unknown", "deleted", "inactive"])
def test_refusals_match_drf_and_take_effect_at_once(alice, case):
    token = Token.objects.create(user=alice)
    api = by_token(token.key)
    assert api.get("/api/context/?scope=nothing").status_code == 404
    key = token.key
    if case == "unknown":
        key = "0" * 40
    elif case == "deleted":
        token.delete()
    else:
        alice.is_active = False
        alice.save()
    ours, drf = [], []
    for auth, errors in (
        (TokenAuthentication(), ours),
        (authentication.TokenAuthentication(), drf),
    ):
        try:
            auth.authenticate_credentials(key)
        except Exception as error:  # noqa: BLE001 - compared below
            errors.append((type(error), str(error.detail)))
    assert ours == drf and len(ours) == 1
    response = by_token(key).get("/api/context/?scope=nothing")
    assert response.status_code == 401 and response.json()["code"] == "not_authenticated"


def test_permission_checks_cost_no_query_and_changes_hold_from_the_next_request(
    make_user, django_assert_num_queries, is_postgres
):
    from django.contrib.auth.models import Group, Permission

    service = make_user("service", "agentstate.view_run")
    group = Group.objects.create(name="reviewers")
    group.permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
    service.groups.add(group)
    key = Token.objects.create(user=service).key
    user, _ = TokenAuthentication().authenticate_credentials(key)
    with django_assert_num_queries(0 if is_postgres else 2):
        assert user.has_perm("agentstate.view_run")
        assert user.has_perm("agentstate.decide_approvalrequest")
        assert not user.has_perm("agentstate.change_run")
    assert user.get_all_permissions() == {
        "agentstate.view_run",
        "agentstate.decide_approvalrequest",
    }
    service.user_permissions.clear()
    service.groups.clear()
    user, _ = TokenAuthentication().authenticate_credentials(key)
    assert not user.has_perm("agentstate.view_run")
    assert not user.has_perm("agentstate.decide_approvalrequest")


@pytest.mark.postgres_only
@pytest.mark.parametrize("prepares", [True, False])
def test_a_connection_that_prepares_nothing_reads_the_token_by_its_function(make_user, prepares):
    """Without prepared statements the lookup goes through ``agentstate_token``, which
    keeps its plan; the token, user and permissions read are the same either way."""
    from django.contrib.auth.models import Group, Permission
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    service = make_user("service", "agentstate.view_run")
    group = Group.objects.create(name="reviewers")
    group.permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
    service.groups.add(group)
    token = Token.objects.create(user=service)
    connection.ensure_connection()
    raw = connection.connection
    kept = raw.prepare_threshold
    raw.prepare_threshold = 5 if prepares else None
    try:
        with CaptureQueriesContext(connection) as queries:
            user, auth = TokenAuthentication().authenticate_credentials(token.key)
            unknown = by_token("0" * 40).get("/api/context/?scope=nothing")
    finally:
        raw.prepare_threshold = kept
    assert ("agentstate_token" in queries[0]["sql"]) is not prepares
    assert (user.pk, user.username, user.password) == (service.pk, "service", service.password)
    assert (auth.key, auth.created) == (token.key, token.created)
    assert user._user_perm_cache == {"agentstate.view_run"}
    assert user._group_perm_cache == {"agentstate.decide_approvalrequest"}
    assert unknown.status_code == 401
