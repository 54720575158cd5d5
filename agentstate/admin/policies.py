"""Approval policies in the admin: the standing decisions, each linked to the requests it
decided, and a revoke action.

Policies are made from a pending request's page ("Approve and always approve
this tool for this user", see ``agentstate.admin.runs``) or over REST, and
revoked with the list action; all go through ``agentstate.services.approvals``
(the same rules and events as over REST), so every field here is read-only.
Viewing and revoking take ``agentstate.decide_approvalrequest``, as deciding
does (``view_approvalpolicy`` also shows them).
"""

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agentstate.exceptions import AlreadyRevoked, PolicyNotFound
from agentstate.models import ApprovalPolicy
from agentstate.services import approvals

DECIDE_PERM = "agentstate.decide_approvalrequest"


def policy_link(policy: ApprovalPolicy | None) -> str:
    """A link to a policy's admin page, or a dash."""
    if policy is None:
        return "—"
    url = reverse("admin:agentstate_approvalpolicy_change", args=[policy.pk])
    return format_html('<a href="{}">{} #{}</a>', url, _("policy"), policy.pk)


class ActiveFilter(admin.SimpleListFilter):
    """In force now (neither revoked nor expired, by the database clock), or not."""

    title = _("in force")
    parameter_name = "active"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[Any, str]]:
        return [("yes", str(_("yes"))), ("no", str(_("no")))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = {"yes": True, "no": False}.get(self.value() or "")
        if value is None:
            return queryset
        return queryset & approvals.policies(active=value)


@admin.register(ApprovalPolicy)
class ApprovalPolicyAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "tool_name",
        "decision",
        "user",
        "short_arguments",
        "expires_at",
        "state",
        "decisions",
    )
    list_display_links = ("id", "tool_name")
    list_filter = (ActiveFilter, "decision", "tool_name")
    search_fields = ("tool_name", "reason")
    list_select_related = ("user", "created_by")
    actions = ("revoke_selected",)
    fields = readonly_fields = (
        "tool_name",
        "decision",
        "user",
        "pretty_arguments",
        "expires_at",
        "reason",
        "state",
        "decisions",
        "created_by",
        "created_at",
        "revoked_by",
        "revoked_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApprovalPolicy]:
        policies: QuerySet[ApprovalPolicy] = super().get_queryset(request)
        return policies.annotate(decided=Count("decided_requests"))

    @admin.display(description=_("arguments to match"))
    def short_arguments(self, policy: ApprovalPolicy) -> str:
        if policy.arguments is None:
            return str(_("any"))
        return format_html(
            "<code>{}</code>", json.dumps(policy.arguments, ensure_ascii=False, sort_keys=True)
        )

    @admin.display(description=_("arguments to match"))
    def pretty_arguments(self, policy: ApprovalPolicy) -> str:
        if policy.arguments is None:
            return str(_("any"))
        return format_html(
            "<pre>{}</pre>",
            json.dumps(policy.arguments, indent=2, ensure_ascii=False, sort_keys=True),
        )

    @admin.display(description=_("state"))
    def state(self, policy: ApprovalPolicy) -> str:
        if policy.revoked_at is not None:
            return str(_("revoked"))
        if policy.expires_at is not None and policy.expires_at <= timezone.now():
            return str(_("expired"))
        return str(_("in force"))

    @admin.display(description=_("requests it decided"), ordering="decided")
    def decisions(self, policy: ApprovalPolicy) -> str:
        count = getattr(policy, "decided", None)
        if count is None:
            count = policy.decided_requests.count()
        url = reverse("admin:agentstate_approvalrequest_changelist")
        return format_html('<a href="{}?policy__id__exact={}">{}</a>', url, policy.pk, count)

    # Permissions: made by the services only; viewing and revoking take the reviewers' permission.

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(DECIDE_PERM)

    def has_view_permission(self, request: HttpRequest, obj: ApprovalPolicy | None = None) -> bool:
        return super().has_view_permission(request, obj) or self.has_revoke_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: ApprovalPolicy | None = None
    ) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: ApprovalPolicy | None = None
    ) -> bool:
        return False

    @admin.action(description=_("Revoke selected policies"), permissions=["revoke"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApprovalPolicy]) -> None:
        done = already = 0
        for pk in queryset.order_by("pk").values_list("pk", flat=True):
            try:
                approvals.revoke_policy(pk, by=request.user)
                done += 1
            except (AlreadyRevoked, PolicyNotFound):
                already += 1
        if done:
            self.message_user(
                request,
                ngettext("%(count)d policy revoked.", "%(count)d policies revoked.", done)
                % {"count": done},
                messages.SUCCESS,
            )
        if already:
            self.message_user(
                request,
                ngettext(
                    "%(count)d policy was already revoked.",
                    "%(count)d policies were already revoked.",
                    already,
                )
                % {"count": already},
                messages.WARNING,
            )
