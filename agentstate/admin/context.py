"""Scopes and their variables, read in the admin.

Variables change only through ``agentstate.services.context`` (versions,
list positions, actors), so the admin shows them read-only: a scope's page
lists its variables inline with their values pretty-printed, a list shown as
the JSON list of its elements (the first ``LIST_PREVIEW`` of them for a long
one). A scope can be deleted, with its variables.
"""

import json
from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agentstate.models import Scope, Variable

LIST_PREVIEW = 100


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON in a ``<pre>`` block, escaped."""
    return format_html(
        '<pre style="margin:0; white-space:pre-wrap">{}</pre>',
        json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False),
    )


def variable_value(variable: Variable) -> Any:
    """The stored value; for a list, its first ``LIST_PREVIEW`` elements."""
    if not variable.is_list:
        return variable.value
    return list(
        variable.elements.order_by("position").values_list("value", flat=True)[:LIST_PREVIEW]
    )


class VariableInline(admin.TabularInline):
    model = Variable
    extra = 0
    can_delete = False
    show_change_link = False
    fields = readonly_fields = (
        "name",
        "pretty_value",
        "length_display",
        "version",
        "updated_by",
        "updated_at",
    )
    ordering = ("name",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description=_("value"))
    def pretty_value(self, variable: Variable) -> str:
        shown = pretty_json(variable_value(variable))
        hidden = variable.length - LIST_PREVIEW if variable.is_list else 0
        if hidden > 0:
            more = ngettext("… and %(count)d more element", "… and %(count)d more elements", hidden)
            return format_html("{}<em>{}</em>", shown, more % {"count": hidden})
        return shown

    @admin.display(description=_("elements"))
    def length_display(self, variable: Variable) -> str:
        return str(variable.length) if variable.is_list else "—"


@admin.register(Scope)
class ScopeAdmin(admin.ModelAdmin):
    list_display = ("key", "owner", "variable_count", "created_at")
    list_filter = (("owner", admin.EmptyFieldListFilter),)
    search_fields = ("key", "variables__name")
    list_select_related = ("owner",)
    ordering = ("key", "pk")
    fields = readonly_fields = ("key", "owner", "created_at")
    inlines = (VariableInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        scopes: QuerySet[Scope] = super().get_queryset(request)
        return scopes.annotate(variable_count=Count("variables", distinct=True))

    @admin.display(description=_("variables"), ordering="variable_count")
    def variable_count(self, scope: Scope) -> int:
        count: int = scope.variable_count  # type: ignore[attr-defined]  # annotated
        return count

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
