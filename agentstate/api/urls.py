"""agentstate's REST API: ``path("api/", include("agentstate.api.urls"))``."""

from django.urls import path

from . import views_context, views_events, views_pauses
from .docs import DocsView, SchemaView

app_name = "agentstate"

urlpatterns = [
    path("context/", views_context.ContextView.as_view(), name="context"),
    path("context/push/", views_context.PushView.as_view(), name="context-push"),
    path("context/pop/", views_context.PopView.as_view(), name="context-pop"),
    path("scopes/", views_context.ScopesView.as_view(), name="scopes"),
    path("events/", views_events.EventsView.as_view(), name="events"),
    path("pauses/", views_pauses.PausesView.as_view(), name="pauses"),
    path("pauses/claim/", views_pauses.ClaimView.as_view(), name="pauses-claim"),
    path("pauses/resolve/", views_pauses.ResolveView.as_view(), name="pauses-resolve"),
    path("pauses/cancel/", views_pauses.CancelView.as_view(), name="pauses-cancel"),
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", DocsView.as_view(), name="docs"),
]
