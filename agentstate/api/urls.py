"""agentstate's REST API: ``path("api/", include("agentstate.api.urls"))``.

Every path is described in docs/rest-api.md.
"""

import re
from typing import Any

from django.http import HttpRequest, HttpResponsePermanentRedirect, JsonResponse
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt

from .context import views as views_context
from .docs import AssetView, DocsView, RedocView, SchemaView
from .errors import NOT_FOUND, error_body
from .events import views as views_events
from .oversight import views as views_oversight
from .pauses import views as views_pauses
from .policies import views as views_policies
from .runs import views as views_runs
from .waiting import Waitable
from .webhooks import views as views_webhooks

app_name = "agentstate"

urlpatterns = [
    path("context/", views_context.ContextView.as_view(), name="context"),
    path("context/list/", views_context.ListView.as_view(), name="context-list"),
    path("context/push/", views_context.PushView.as_view(), name="context-push"),
    path("context/pop/", views_context.PopView.as_view(), name="context-pop"),
    path("scopes/", views_context.ScopesView.as_view(), name="scopes"),
    path("events/", Waitable(views_events.EventsView), name="events"),
    path(
        "events/stream/", Waitable(views_events.EventStreamView, always=True), name="events-stream"
    ),
    path("pauses/", views_pauses.PausesView.as_view(), name="pauses"),
    path("pauses/claim/", views_pauses.ClaimView.as_view(), name="pauses-claim"),
    path("pauses/resolve/", views_pauses.ResolveView.as_view(), name="pauses-resolve"),
    path("pauses/cancel/", views_pauses.CancelView.as_view(), name="pauses-cancel"),
    path("runs/", views_runs.RunsView.as_view(), name="runs"),
    path("runs/<str:run_id>/", Waitable(views_runs.RunView), name="run"),
    path("runs/<str:run_id>/usage/", views_runs.UsageView.as_view(), name="run-usage"),
    path("runs/<str:run_id>/budget/", views_policies.RunBudgetView.as_view(), name="run-budget"),
    path("runs/<str:run_id>/approvals/", views_runs.ApprovalsView.as_view(), name="run-approvals"),
    path(
        "runs/<str:run_id>/approvals/approve/", views_runs.ApproveView.as_view(), name="run-approve"
    ),
    path("runs/<str:run_id>/approvals/reject/", views_runs.RejectView.as_view(), name="run-reject"),
    path(
        "runs/<str:run_id>/approval-requests/",
        views_runs.RunApprovalRequestsView.as_view(),
        name="run-approval-requests",
    ),
    path("approval-requests/", views_runs.ApprovalRequestsView.as_view(), name="approval-requests"),
    path(
        "approval-requests/<str:id>/",
        Waitable(views_runs.ApprovalRequestView),
        name="approval-request",
    ),
    path(
        "approval-requests/<str:id>/decide/",
        views_runs.DecideView.as_view(),
        name="approval-request-decide",
    ),
    path(
        "users/<str:username>/budget/", views_policies.UserBudgetView.as_view(), name="user-budget"
    ),
    path("approval-policies/", views_policies.PoliciesView.as_view(), name="approval-policies"),
    path(
        "approval-policies/<str:id>/revoke/",
        views_policies.RevokeView.as_view(),
        name="approval-policy-revoke",
    ),
    path("approval-rules/", views_oversight.RulesView.as_view(), name="approval-rules"),
    path("approval-rules/<str:id>/", views_oversight.RuleView.as_view(), name="approval-rule"),
    path(
        "runs/<str:run_id>/approvals/consume/",
        views_runs.ConsumeView.as_view(),
        name="run-approvals-consume",
    ),
    path("webhooks/", views_webhooks.WebhooksView.as_view(), name="webhooks"),
    path("webhooks/<str:id>/", views_webhooks.WebhookView.as_view(), name="webhook"),
    path(
        "webhooks/<str:id>/deliveries/",
        views_webhooks.DeliveriesView.as_view(),
        name="webhook-deliveries",
    ),
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", DocsView.as_view(), name="docs"),
    path("redoc/", RedocView.as_view(), name="redoc"),
    path("docs/assets/<str:name>", AssetView.as_view(), name="docs-asset"),
]


@csrf_exempt  # as the API's views are: the redirect changes nothing, the view it leads to checks
def with_slash(request: HttpRequest, **kwargs: Any) -> HttpResponsePermanentRedirect:
    """A path of the API without its trailing slash: 308 to the path with it, which a
    client follows with the same method and body. Django's ``APPEND_SLASH`` would
    answer 301, which clients follow with a GET, and fail a POST under ``DEBUG``."""
    return HttpResponsePermanentRedirect(
        request.get_full_path(force_append_slash=True), preserve_request=True
    )


urlpatterns += [
    path(str(pattern.pattern).removesuffix("/"), with_slash)
    for pattern in urlpatterns
    if str(pattern.pattern).endswith("/")
]


@csrf_exempt
def not_found(request: HttpRequest, **kwargs: Any) -> JsonResponse:
    """Any other path beneath one of the API's own: a 404 in the API's error shape
    rather than the site's page. Paths beside them stay the site's, wherever the API
    is mounted."""
    return JsonResponse(
        error_body(*NOT_FOUND),
        status=404,
        json_dumps_params={"separators": (",", ":")},  # as the API renders its JSON
    )


_RESOURCES = sorted({str(pattern.pattern).split("/")[0] for pattern in urlpatterns})
urlpatterns += [
    re_path(rf"^(?:{'|'.join(map(re.escape, _RESOURCES))})/", not_found),
]
