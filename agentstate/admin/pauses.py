"""Paused runs in the admin: what waits for whom, for how long, and a cancel action.

Pauses are written by the services only, so every field is read-only; a
pending pause is cancelled through ``agentstate.services.pauses.cancel`` (the
same rules and event as over REST), and resolved or expired pauses are
final: view-only, and deletable (the sweep's retention deletes them too).
"""

import json
from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agentstate.exceptions import AgentStateError
from agentstate.models import PausedRun
from agentstate.services import pauses

FINAL = (PausedRun.Status.RESOLVED, PausedRun.Status.EXPIRED)


def _duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {seconds}s"


@admin.register(PausedRun)
class PausedRunAdmin(admin.ModelAdmin):
    list_display = ("__str__", "owner", "status", "age", "time_left", "claimed_by", "created_at")
    list_filter = ("status", "owner")
    search_fields = ("chat_id", "tool_call_id", "owner")
    list_select_related = ("created_by",)
    ordering = ("-created_at", "-pk")
    actions = ["cancel_pending"]
    fields = readonly_fields = (
        "chat_id",
        "tool_call_id",
        "owner",
        "created_by",
        "question_id",
        "status",
        "created_at",
        "expires_at",
        "time_left",
        "claimed_at",
        "claimed_by",
        "resolved_at",
        "pretty_payload",
    )

    @admin.display(description=_("age"), ordering="created_at")
    def age(self, pause: PausedRun) -> str:
        return _duration(timezone.now() - pause.created_at)

    @admin.display(description=_("time left"), ordering="expires_at")
    def time_left(self, pause: PausedRun) -> str:
        if pause.status != PausedRun.Status.PENDING:
            return "—"
        left = pause.expires_at - timezone.now()
        return _duration(left) if left > timedelta(0) else str(_("expired (not yet swept)"))

    @admin.display(description=_("payload"))
    def pretty_payload(self, pause: PausedRun) -> str:
        return format_html("<pre>{}</pre>", json.dumps(pause.payload, indent=2, ensure_ascii=False))

    @admin.action(description=_("Cancel selected pending pauses"), permissions=["change"])
    def cancel_pending(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        cancelled = refused = 0
        for chat_id, tool_call_id in queryset.values_list("chat_id", "tool_call_id").iterator():
            try:
                pauses.cancel(chat_id, tool_call_id, by=request.user)
                cancelled += 1
            except AgentStateError:
                refused += 1
        if cancelled:
            self.message_user(
                request,
                ngettext("Cancelled %(count)d pause.", "Cancelled %(count)d pauses.", cancelled)
                % {"count": cancelled},
                messages.SUCCESS,
            )
        if refused:
            self.message_user(
                request,
                ngettext(
                    "%(count)d pause was not pending and was left as it was.",
                    "%(count)d pauses were not pending and were left as they were.",
                    refused,
                )
                % {"count": refused},
                messages.WARNING,
            )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: PausedRun | None = None) -> bool:
        if obj is not None and obj.status in FINAL:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: PausedRun | None = None) -> bool:
        if obj is not None and obj.status not in FINAL:
            return False
        return super().has_delete_permission(request, obj)
