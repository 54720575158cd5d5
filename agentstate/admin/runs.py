"""Runs and the review queue in the admin: the reviewers' dashboard
(docs/admin.md).

Approval requests are listed pending first, then oldest first, with their
run, tool, call id, pretty-printed arguments and age. Reviewers holding
``agentstate.decide_approvalrequest`` decide them with the list actions
(approve, reject, always approve, always reject) or with the Approve and
Reject buttons of a pending request's page (an optional reason, an "always"
choice, the arguments to run, editable: only a change counts as an edit).
The page's "Approve and always approve this tool for this user" approves
and creates an approval policy for the run's creator (an optional duration
and arguments to match) in one transaction. A request a policy decided links
to it. Every decision goes through ``agentstate.services.approvals.decide``,
the service the REST API uses, so an admin reviewer racing a REST client gets
one decision and the other is told it was already decided. Decided requests
are read-only. Runs are read-only: usage, approval records, requests; holders
of ``agentstate.change_budget`` edit the run's budget on its page.
"""

import difflib
import json
from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import csrf_protect_m
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import BooleanField, Case, IntegerField, Q, QuerySet, Value, When
from django.db.models.expressions import Combinable
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agentstate.admin.budgets import CHANGE_PERM as BUDGET_PERM
from agentstate.admin.budgets import RunBudgetInline
from agentstate.admin.pauses import _duration
from agentstate.admin.policies import policy_link
from agentstate.exceptions import AgentStateError, AlreadyDecided, ApprovalRequestExpired
from agentstate.models import ApprovalPolicy, ApprovalRecord, ApprovalRequest, Event, Run
from agentstate.policies import json_equal
from agentstate.services import approvals, runs
from agentstate.services.wakeups import latest_id

Status = ApprovalRequest.Status
Decision = ApprovalPolicy.Decision
DECIDE_PERM = "agentstate.decide_approvalrequest"

# The longest a policy made from a request's page may last, in days.
MAX_POLICY_DAYS = 3650

# Action name -> (decision, always, past-tense label for the message).
ACTIONS = {
    "approve_selected": (Decision.APPROVE, False, _("approved")),
    "reject_selected": (Decision.REJECT, False, _("rejected")),
    "always_approve_selected": (
        Decision.APPROVE,
        True,
        _("approved, with every later call of the tool"),
    ),
    "always_reject_selected": (
        Decision.REJECT,
        True,
        _("rejected, with every later call of the tool"),
    ),
}


def _pretty(value: Any) -> str:
    return format_html(
        "<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    )


def pending_count() -> int:
    return ApprovalRequest.objects.filter(approvals.in_status(Status.PENDING)).count()


class CurrentStatusFilter(admin.SimpleListFilter):
    """By status as ``decide`` sees it: pending past ``APPROVAL_TTL`` is expired."""

    title = _("status")
    parameter_name = "current_status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[Any, str]]:
        return [(value, str(label)) for value, label in Status.choices]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value in Status.values:
            return queryset.filter(approvals.in_status(value))
        return queryset


class MineToDecideFilter(admin.SimpleListFilter):
    """The pending requests the viewing reviewer may decide (its rule's reviewers,
    no self-approval), or those it may not."""

    title = _("yours to decide")
    parameter_name = "yours"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[Any, str]]:
        return [("1", str(_("Yes"))), ("0", str(_("No")))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in ("0", "1"):
            return queryset.filter(yours=self.value() == "1")
        return queryset


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    change_form_template = "admin/agentstate/approvalrequest/change_form.html"
    list_display = (
        "id",
        "run_link",
        "tool_name",
        "call_id",
        "short_arguments",
        "age",
        "current_status",
        "votes_count",
        "actionable",
        "decided_by",
        "decided_at",
        "decided_by_policy",
    )
    list_display_links = ("id", "tool_name")
    list_filter = (CurrentStatusFilter, MineToDecideFilter, "tool_name")
    search_fields = ("run__run_id", "tool_name", "call_id")
    list_select_related = ("run", "decided_by", "created_by", "policy")
    actions = tuple(ACTIONS)
    fields = readonly_fields = (
        "run_link",
        "tool_name",
        "call_id",
        "pretty_arguments",
        "run_context",
        "current_status",
        "always",
        "created_by",
        "created_at",
        "age",
        "decided_by",
        "decided_at",
        "decided_by_policy",
        "pretty_approved_arguments",
        "arguments_diff",
        "reason",
        "oversight",
        "votes_so_far",
        "audit_trail",
    )

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> Any:
        """The queue, kept current by a small script on the event feed (when the site
        mounts the REST API): requests filed or decided meanwhile show without a reload."""
        try:
            feed = reverse("agentstate:events")
        except NoReverseMatch:
            feed = None
        if feed is not None:
            extra_context = {
                **(extra_context or {}),
                "agentstate_feed": {"url": feed, "after": latest_id()},
            }
        return super().changelist_view(request, extra_context)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        """Annotated with ``current_status``, ``queue`` (0 for pending) and ``yours`` (the
        viewing reviewer may decide it now), then ordered."""
        queryset = approvals.with_current_status(self.model._default_manager.get_queryset())
        mine = approvals.decidable_by(request.user)
        queryset = queryset.annotate(
            queue=Case(
                When(approvals.in_status(Status.PENDING), then=Value(0)),
                default=Value(1),
                output_field=IntegerField(),
            ),
            yours=Case(
                When(approvals.in_status(Status.PENDING) & Q(pk__in=mine), then=Value(True)),
                default=Value(False),
                output_field=BooleanField(),
            ),
        ).prefetch_related("votes__by")
        ordered: QuerySet[ApprovalRequest] = queryset.order_by(*self.get_ordering(request))
        return ordered

    def get_ordering(self, request: HttpRequest) -> list[str | Combinable]:
        return ["queue", "created_at", "pk"]

    # Columns.

    @admin.display(description=_("run"), ordering="run__run_id")
    def run_link(self, request_: ApprovalRequest) -> str:
        url = reverse("admin:agentstate_run_change", args=[request_.run_id])
        return format_html('<a href="{}">{}</a>', url, request_.run.run_id)

    @admin.display(description=_("status"), ordering="status")
    def current_status(self, request_: ApprovalRequest) -> str:
        return str(Status(getattr(request_, "current_status", request_.status)).label)

    @admin.display(description=_("age"), ordering="created_at")
    def age(self, request_: ApprovalRequest) -> str:
        return _duration(timezone.now() - request_.created_at)

    @admin.display(description=_("arguments"))
    def short_arguments(self, request_: ApprovalRequest) -> str:
        return _pretty(request_.arguments)

    @admin.display(description=_("arguments"))
    def pretty_arguments(self, request_: ApprovalRequest) -> str:
        return _pretty(request_.arguments)

    @admin.display(description=_("approved arguments"))
    def pretty_approved_arguments(self, request_: ApprovalRequest) -> str:
        if request_.approved_arguments is None:
            return str(_("as filed")) if request_.status == Status.APPROVED else "—"
        return _pretty(request_.approved_arguments)

    @admin.display(description=_("decided by policy"), ordering="policy")
    def decided_by_policy(self, request_: ApprovalRequest) -> str:
        return policy_link(request_.policy)

    @admin.display(description=_("votes"))
    def votes_count(self, request_: ApprovalRequest) -> str:
        if request_.rule_id is None:
            return "—"
        approving = sum(vote.decision == Decision.APPROVE for vote in approvals.votes_of(request_))
        return f"{approving}/{request_.approvals_required}"

    @admin.display(description=_("yours to decide"), boolean=True)
    def actionable(self, request_: ApprovalRequest) -> bool:
        """Whether the reviewer viewing the list may decide it now."""
        return getattr(request_, "yours", False)

    @admin.display(description=_("edit"))
    def arguments_diff(self, request_: ApprovalRequest) -> str:
        """The approved arguments against the filed ones, line by line."""
        if request_.approved_arguments is None:
            return "—"
        lines = difflib.unified_diff(
            _pretty(request_.arguments).splitlines(),
            _pretty(request_.approved_arguments).splitlines(),
            "filed",
            "approved",
            lineterm="",
        )
        return format_html("<pre>{}</pre>", "\n".join(lines))

    @admin.display(description=_("rule"))
    def oversight(self, request_: ApprovalRequest) -> str:
        """The rule as the request copied it when filed."""
        if request_.rule_id is None:
            return str(_("none: one decision, by anyone who may decide"))
        parts = [
            _("rule %(id)s") % {"id": request_.rule_id},
            _("%(n)d approval(s) required") % {"n": request_.approvals_required},
            _("reviewers: %(group)s") % {"group": request_.reviewers or _("anyone")},
            _("self-approval allowed") if request_.allow_self_approval else _("no self-approval"),
            _("deadline %(at)s, then %(what)s")
            % {"at": request_.deadline, "what": request_.get_on_deadline_display()},
        ]
        if request_.escalate_to is not None:
            parts.append(
                _("escalates to %(group)s at %(at)s")
                % {"group": request_.escalate_to, "at": request_.escalate_at}
            )
        if request_.consumed_at is not None:
            parts.append(_("used at %(at)s") % {"at": request_.consumed_at})
        return "; ".join(str(part) for part in parts)

    @admin.display(description=_("votes so far"))
    def votes_so_far(self, request_: ApprovalRequest) -> str:
        votes = approvals.votes_of(request_)
        if not votes:
            return "—"
        return format_html_join(
            "",
            "<div>{} — {} {} ({}…){}</div>",
            (
                (
                    vote.at,
                    vote.by or _("(deleted user)"),
                    vote.get_decision_display(),
                    vote.arguments_digest[:12],
                    f": {vote.reason}" if vote.reason else "",
                )
                for vote in votes
            ),
        )

    @admin.display(description=_("audit trail"))
    def audit_trail(self, request_: ApprovalRequest) -> str:
        """Filed, each vote, the decision (by whom, or which rule or policy), its use."""
        rows = Event.objects.filter(
            object_type="approvalrequest", object_id=str(request_.pk)
        ).order_by("created_at", "pk")
        return format_html(
            "<table><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr>{}</table>",
            _("when"),
            _("what"),
            _("who"),
            _("details"),
            format_html_join(
                "",
                "<tr><td>{}</td><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>",
                (
                    (event.created_at, event.kind, event.actor or "—", _pretty(event.details))
                    for event in rows
                ),
            ),
        )

    @admin.display(description=_("the run's context"))
    def run_context(self, request_: ApprovalRequest) -> str:
        return _pretty(request_.run.context)

    # Permissions: deciding takes decide_approvalrequest; decided requests are read-only.

    def has_decide_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(DECIDE_PERM)

    def has_view_permission(self, request: HttpRequest, obj: ApprovalRequest | None = None) -> bool:
        return super().has_view_permission(request, obj) or self.has_decide_permission(request)

    def has_change_permission(
        self, request: HttpRequest, obj: ApprovalRequest | None = None
    ) -> bool:
        if obj is not None and obj.status != Status.PENDING:
            return False
        return self.has_decide_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    # Deciding: the list actions and the buttons of the change page.

    def _decide_many(self, request: HttpRequest, queryset: QuerySet, action: str) -> None:
        decision, always, label = ACTIONS[action]
        done = already = expired = 0
        refused: list[str] = []
        for pk in queryset.order_by("created_at", "pk").values_list("pk", flat=True):
            try:
                approvals.decide(pk, decision, always, by=request.user)
                done += 1
            except AlreadyDecided:
                already += 1
            except ApprovalRequestExpired:
                expired += 1
            except AgentStateError as error:  # self_approval, not_a_reviewer, already_voted
                refused.append(f"{pk}: {error.detail}")
        for refusal in refused:
            self.message_user(request, refusal, messages.ERROR)
        if done:
            self.message_user(
                request,
                ngettext("%(count)d request %(label)s.", "%(count)d requests %(label)s.", done)
                % {"count": done, "label": label},
                messages.SUCCESS,
            )
        if already:
            self.message_user(
                request,
                ngettext(
                    "%(count)d request was already decided and was left as it was.",
                    "%(count)d requests were already decided and were left as they were.",
                    already,
                )
                % {"count": already},
                messages.WARNING,
            )
        if expired:
            self.message_user(
                request,
                ngettext(
                    "%(count)d request had expired and was not decided.",
                    "%(count)d requests had expired and were not decided.",
                    expired,
                )
                % {"count": expired},
                messages.WARNING,
            )

    @admin.action(description=_("Approve selected requests"), permissions=["decide"])
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._decide_many(request, queryset, "approve_selected")

    @admin.action(description=_("Reject selected requests"), permissions=["decide"])
    def reject_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._decide_many(request, queryset, "reject_selected")

    @admin.action(
        description=_("Always approve the tools of selected requests"), permissions=["decide"]
    )
    def always_approve_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._decide_many(request, queryset, "always_approve_selected")

    @admin.action(
        description=_("Always reject the tools of selected requests"), permissions=["decide"]
    )
    def always_reject_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._decide_many(request, queryset, "always_reject_selected")

    @csrf_protect_m  # type: ignore[untyped-decorator]
    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """A POST with ``_decision`` decides the request; anything else is the usual page."""
        if request.method == "POST" and object_id and "_decision" in request.POST:
            return self._decide_one(request, object_id)
        return super().changeform_view(request, object_id, form_url, extra_context)

    def _decide_one(self, request: HttpRequest, object_id: str) -> HttpResponse:
        obj = self.get_object(request, object_id)
        if obj is None:
            redirect: HttpResponse = self._get_obj_does_not_exist_redirect(  # type: ignore[attr-defined]
                request, self.opts, object_id
            )
            return redirect
        if not self.has_decide_permission(request):
            raise PermissionDenied
        # A request decided since the page was shown is refused by the
        # service (AlreadyDecided) and reported like any other refusal.
        post = request.POST
        always = post.get("always") in ("on", "true", "1")
        choice = post["_decision"]
        try:
            arguments = _edited_arguments(post.get("arguments", ""), obj.arguments)
            decision = Decision.APPROVE if choice == "approve_policy" else choice
            with transaction.atomic():
                approvals.decide(
                    obj.pk,
                    decision,
                    always,
                    by=request.user,
                    reason=post.get("reason", ""),
                    arguments=arguments,
                )
                if choice == "approve_policy":
                    policy = self._make_policy(request, obj)
        except AgentStateError as error:
            self.message_user(request, error.detail, messages.ERROR)
            return HttpResponseRedirect(request.path)
        if choice == "approve_policy":
            self.message_user(
                request,
                format_html(
                    "{} {}",
                    _("Later calls of %(tool)s in the runs of %(user)s are approved by")
                    % {"tool": obj.tool_name, "user": obj.run.created_by},
                    policy_link(policy),
                ),
                messages.SUCCESS,
            )
        decided = ApprovalRequest.objects.get(pk=obj.pk)
        self.message_user(
            request,
            _("Request %(request)s was %(status)s.")
            % {"request": decided, "status": decided.get_status_display()},
            messages.SUCCESS,
        )
        return HttpResponseRedirect(reverse("admin:agentstate_approvalrequest_changelist"))

    def _make_policy(self, request: HttpRequest, obj: ApprovalRequest) -> Any:
        """The policy the page's "Approve and always approve ..." asks for, by a reviewer
        who just decided the request (so with its right to); a vote that left the
        request pending (its rule wants more approvals) makes none."""
        if ApprovalRequest.objects.filter(pk=obj.pk, status=Status.PENDING).exists():
            raise AgentStateError(
                str(_("The request needs more approvals: a policy would decide alone."))
            )
        creator = obj.run.created_by
        if creator is None:
            raise AgentStateError(
                str(_("The run has no creator: a policy for it would decide every user's calls."))
            )
        text = request.POST.get("policy_days", "").strip()
        days = None
        if text:
            if not (text.isascii() and text.isdigit() and 0 < int(text) <= MAX_POLICY_DAYS):
                raise AgentStateError(
                    str(_("The duration must be 1 to %(max)d days, or left empty."))
                    % {"max": MAX_POLICY_DAYS}
                )
            days = int(text)
        pattern = _json_field(request.POST.get("policy_arguments", ""), _("Arguments to match"))
        if pattern is not None and not isinstance(pattern, dict):
            raise AgentStateError(str(_("Arguments to match must be a JSON object, or empty.")))
        return approvals.create_policy(
            obj.tool_name,
            Decision.APPROVE,
            user=creator,
            arguments=pattern,
            expires_at=None if days is None else timedelta(days=days),
            reason=request.POST.get("reason", ""),
            by=request.user,
        )

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        context["can_decide"] = (
            obj is not None
            and obj.status == Status.PENDING
            and self.has_decide_permission(request)
            and getattr(obj, "yours", False)
        )
        if context["can_decide"]:
            context["filed_arguments"] = json.dumps(
                obj.arguments, indent=2, ensure_ascii=False, sort_keys=True
            )
            # "Always approve" and an approve policy decide later calls alone: not on
            # a request that wants several approvals ("votes": votes_required), nor by
            # a member of its escalation group who is not among its reviewers
            # ("escalation": not_a_reviewer). The template words the reason.
            if obj.approvals_required > 1:
                context["approve_once_only"] = "votes"
            elif not _among_reviewers(request.user, obj):
                context["approve_once_only"] = "escalation"
            context["run_creator"] = None if "approve_once_only" in context else obj.run.created_by
        return super().render_change_form(request, context, add, change, form_url, obj)


def _among_reviewers(user: Any, obj: ApprovalRequest) -> bool:
    """Whether ``user`` is among the request's reviewers (or it names none)."""
    if obj.reviewers_id is None:
        return True
    groups = getattr(user, "groups", None)
    return groups is not None and groups.filter(pk=obj.reviewers_id).exists()


def _json_field(text: str, label: Any) -> Any:
    """A JSON text of the decision box (empty: ``None``); bad JSON is refused."""
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as error:
        raise AgentStateError(
            str(_("%(label)s: not JSON (%(error)s).")) % {"label": label, "error": error}
        ) from None


def _edited_arguments(text: str, filed: Any) -> Any:
    """The arguments to run, when the box holds other JSON than the filed arguments
    (prefilled with them); ``None``: no edit (unchanged, or emptied)."""
    value = _json_field(text, _("Arguments to run"))
    return None if value is None or json_equal(value, filed) else value


class RunPartInline(admin.TabularInline):
    """Read-only rows of a run, shown to whoever may see the run's page."""

    extra = 0
    can_delete = False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ApprovalRecordInline(RunPartInline):
    model = ApprovalRecord
    fields = readonly_fields = (
        "tool_name",
        "approved",
        "rejected",
        "calls_decided",
        "updated_by",
        "updated_at",
    )

    @admin.display(description=_("approved"))
    def approved(self, record: ApprovalRecord) -> str:
        return self._side(record, "approved")

    @admin.display(description=_("rejected"))
    def rejected(self, record: ApprovalRecord) -> str:
        return self._side(record, "rejected")

    @staticmethod
    def _side(record: ApprovalRecord, side: str) -> str:
        return json.dumps(runs.record_json(record)[side])

    @admin.display(description=_("per-call decisions: who, when, why"))
    def calls_decided(self, record: ApprovalRecord) -> str:
        return format_html_join(
            "",
            "<div>{} {}: {} {} {}</div>",
            (
                (
                    call.call_id,
                    call.get_decision_display(),
                    call.decided_by or "—",
                    timezone.localtime(call.created_at).strftime("%Y-%m-%d %H:%M:%S"),
                    call.reason,
                )
                for call in record.calls.select_related("decided_by").order_by("pk")
            ),
        )


class ApprovalRequestInline(RunPartInline):
    model = ApprovalRequest
    show_change_link = True
    fields = readonly_fields = (
        "tool_name",
        "call_id",
        "status",
        "decided_by",
        "decided_at",
        "policy",
        "reason",
        "created_at",
    )
    ordering = ("created_at", "pk")


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = (
        "run_id",
        "created_by",
        "requests",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "created_at",
    )
    search_fields = ("run_id",)
    list_select_related = ("created_by",)
    date_hierarchy = "created_at"
    fields = readonly_fields = (
        "run_id",
        "created_by",
        "pretty_context",
        *Run.USAGE_FIELDS,
        "created_at",
        "updated_at",
    )
    inlines = (RunBudgetInline, ApprovalRecordInline, ApprovalRequestInline)

    @admin.display(description=_("context"))
    def pretty_context(self, run: Run) -> str:
        return _pretty(run.context)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        """The run itself is read-only; a holder of ``change_budget`` saves its budget."""
        return request.user.has_perm(BUDGET_PERM)

    def save_model(self, request: HttpRequest, obj: Run, form: Any, change: bool) -> None:
        """Nothing of the run is written (its usage moves only through ``add_usage``)."""


def _count_pending_in_app_list(site: admin.AdminSite) -> None:
    """Show ``Approval requests (N pending)`` on the admin index and in the sidebar.

    Wraps the site's ``get_app_list`` (which both use) instead of replacing
    a template, so it works whatever the site's template and app order.
    """
    original = site.get_app_list

    def get_app_list(request: HttpRequest, app_label: str | None = None) -> list[Any]:
        app_list = original(request, app_label)
        for app in app_list:
            for model in app["models"]:
                if model["model"] is ApprovalRequest:
                    model["name"] = _("%(name)s (%(count)d pending)") % {
                        "name": model["name"],
                        "count": pending_count(),
                    }
        return app_list

    site.get_app_list = get_app_list  # type: ignore[method-assign]


_count_pending_in_app_list(admin.site)
