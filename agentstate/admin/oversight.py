"""Approval rules in the admin: who decides a tool's requests, how many, by when.

Managed with ``agentstate.change_approvalrule`` (adding and deleting with their
own permissions); every change goes through ``agentstate.services.oversight``,
so the admin writes the same events (``rule.created``, ``rule.changed``,
``rule.deleted``) as REST and the Python API.
"""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from agentstate.models import ApprovalRule
from agentstate.services import oversight

EDITABLE = (
    "approvals_required",
    "reviewers",
    "allow_self_approval",
    "deadline",
    "on_deadline",
    "remind_before",
    "escalate_after",
    "escalate_to",
)


@admin.register(ApprovalRule)
class ApprovalRuleAdmin(admin.ModelAdmin):
    list_display = (
        "tool_name",
        "approvals_required",
        "reviewers",
        "allow_self_approval",
        "deadline",
        "on_deadline",
        "remind_before",
        "escalate_after",
        "escalate_to",
        "updated_at",
    )
    list_select_related = ("reviewers", "escalate_to")
    search_fields = ("tool_name",)
    fields = ("tool_name", *EDITABLE)

    def save_model(self, request: HttpRequest, obj: ApprovalRule, form: Any, change: bool) -> None:
        values = {name: getattr(obj, name) for name in EDITABLE}
        if change:
            saved = oversight.change_rule(
                obj.pk, tool_name=obj.tool_name, by=request.user, **values
            )
        else:
            saved = oversight.create_rule(obj.tool_name, by=request.user, **values)
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: ApprovalRule) -> None:
        oversight.delete_rule(obj.pk, by=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ApprovalRule]) -> None:
        for pk in queryset.values_list("pk", flat=True):
            oversight.delete_rule(pk, by=request.user)
