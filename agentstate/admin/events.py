"""The event log in the admin: read-only, because an audit trail is append-only."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from agentstate.models import Event


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "kind", "object_type", "object_id", "actor", "owner")
    list_filter = ("kind", "object_type")
    search_fields = ("object_id", "actor")
    date_hierarchy = "created_at"
    list_select_related = ("user", "created_by")
    readonly_fields = (
        "kind",
        "actor",
        "user",
        "object_type",
        "object_id",
        "created_by",
        "owner",
        "details",
        "created_at",
    )
    fields = readonly_fields
    ordering = ("-created_at", "-pk")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
