"""The admin shows scopes with their variables inline, values pretty-printed."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from agentstate.admin.context import LIST_PREVIEW
from agentstate.models import Scope
from agentstate.services import context

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/agentstate/scope/"


@pytest.fixture
def admin_client_() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    return client


def test_changelist_lists_scopes_with_variable_counts(admin_client_, alice):
    context.put("proj/a", "x", 1)
    context.put("proj/a", "y", 2)
    context.put("proj/a", "z", 3, owner=alice)
    page = admin_client_.get(CHANGELIST).content.decode()
    assert "proj/a" in page and "alice" in page


@pytest.mark.parametrize(
    ("query", "found", "missed"),
    [("alpha", "alpha-scope", "beta-scope"), ("needle", "beta-scope", "alpha-scope")],
)
def test_search_by_scope_key_and_variable_name(admin_client_, query, found, missed):
    context.put("alpha-scope", "x", 1)
    context.put("beta-scope", "needle", 1)
    context.put("beta-scope", "needle2", 1)
    page = admin_client_.get(CHANGELIST, {"q": query}).content.decode()
    assert found in page and missed not in page


def test_change_page_shows_values_pretty_printed_and_lists_as_json_lists(admin_client_):
    context.put("s", "obj", {"key": "<b>value</b>"})
    context.push("s", "todo", "first")
    context.push("s", "todo", {"n": 2})
    scope = Scope.objects.get()
    page = admin_client_.get(f"{CHANGELIST}{scope.pk}/change/").content.decode()
    assert "&lt;b&gt;value&lt;/b&gt;" in page and "<b>value</b>" not in page
    assert "{\n  &quot;key&quot;: " in page  # indented JSON
    assert "[\n  &quot;first&quot;,\n  {\n    &quot;n&quot;: 2\n  }\n]" in page


def test_a_long_list_shows_its_first_elements_and_how_many_more(admin_client_):
    context.put("s", "long", list(range(LIST_PREVIEW + 25)))
    page = admin_client_.get(f"{CHANGELIST}{Scope.objects.get().pk}/change/").content.decode()
    assert "and 25 more elements" in page


def test_admin_cannot_add_or_edit_but_can_delete_a_scope(admin_client_):
    context.put("s", "x", [1, 2])
    scope = Scope.objects.get()
    assert admin_client_.get(f"{CHANGELIST}add/").status_code == 403
    response = admin_client_.post(f"{CHANGELIST}{scope.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Scope.objects.exists()
