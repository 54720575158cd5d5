"""REST views over context variables and scopes."""

from typing import Any

from django.db.models import Count
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from agentstate.models import Scope
from agentstate.services import context

from ..access import acting_owner, has_model_perm, named_owner
from ..base import AgentStateAPIView, represent
from ..schema import PAGES, documented
from . import serializers as s


class ScopeOwnerMixin(AgentStateAPIView):
    """Resolves the owner a context request acts for: itself, or ``owner``."""

    def owner_for(self, data: dict[str, Any], write: bool) -> context.Owner:
        """The caller, or the username it names (looked up by the operation itself)."""
        return acting_owner(
            self.request, data.get("owner"), "change_scope" if write else "view_scope"
        )

    def actor(self) -> str:
        return self.request.user.get_username()


class ContextView(ScopeOwnerMixin, AgentStateAPIView):
    @documented(parameters=[s.ContextQuery], responses=s.ContextValues, operation_id="context_get")
    def get(self, request: Request) -> Response:
        q = self.query(s.ContextQuery)
        values = context.get(
            q["scope"], q.get("name") or None, owner=self.owner_for(q, write=False)
        )
        return Response({"scope": q["scope"], "values": values})

    @documented(request=s.PutRequest, responses=s.PutResponse, operation_id="context_put")
    def put(self, request: Request) -> Response:
        d = self.validated(s.PutRequest, request.data)
        result = context.put(
            d["scope"],
            d["name"],
            d["value"],
            if_version=d.get("if_version"),
            owner=self.owner_for(d, write=True),
            by=self.actor(),
        )
        return Response(represent(s.PutResponse, result))

    @documented(
        parameters=[s.ContextDeleteQuery], responses={204: None}, operation_id="context_delete"
    )
    def delete(self, request: Request) -> Response:
        q = self.query(s.ContextDeleteQuery)
        context.delete(q["scope"], q["name"], owner=self.owner_for(q, write=True))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ListView(ScopeOwnerMixin, AgentStateAPIView):
    @documented(parameters=[s.ListQuery], responses=s.ListValues, operation_id="context_list")
    def get(self, request: Request) -> Response:
        q = self.query(s.ListQuery)
        result = context.get_list(
            q["scope"], q["name"], last=q.get("last"), owner=self.owner_for(q, write=False)
        )
        return Response(represent(s.ListValues, result))


class PushView(ScopeOwnerMixin, AgentStateAPIView):
    @documented(request=s.PushRequest, responses=s.PushResponse, operation_id="context_push")
    def post(self, request: Request) -> Response:
        d = self.validated(s.PushRequest, request.data)
        result = context.push(
            d["scope"],
            d["name"],
            d["value"],
            owner=self.owner_for(d, write=True),
            by=self.actor(),
        )
        return Response(represent(s.PushResponse, result))


class PopView(ScopeOwnerMixin, AgentStateAPIView):
    @documented(request=s.PopRequest, responses=s.PopResponse, operation_id="context_pop")
    def post(self, request: Request) -> Response:
        d = self.validated(s.PopRequest, request.data)
        value = context.pop(
            d["scope"],
            d["name"],
            d["mode"],
            owner=self.owner_for(d, write=True),
            by=self.actor(),
        )
        return Response({"scope": d["scope"], "name": d["name"], "value": value})


class ScopesView(ScopeOwnerMixin, AgentStateAPIView):
    @documented(
        parameters=[
            s.ScopeQuery,
            *PAGES,
        ],
        responses=s.ScopeSerializer(many=True),
        operation_id="scopes_list",
    )
    def get(self, request: Request) -> Response:
        q = self.query(s.ScopeQuery)
        scopes = Scope.objects.select_related("owner").annotate(variable_count=Count("variables"))
        if "owner" in q or not has_model_perm(request.user, "view_scope"):
            scopes = scopes.filter(owner=named_owner(request, q.get("owner"), "view_scope"))
        if q.get("prefix"):
            scopes = scopes.filter(key__startswith=q["prefix"])
        return self.paginate(scopes.order_by("key", "pk"), s.ScopeSerializer)

    @documented(
        parameters=[s.ScopeDeleteQuery], responses={204: None}, operation_id="scopes_delete"
    )
    def delete(self, request: Request) -> Response:
        q = self.query(s.ScopeDeleteQuery)
        context.delete_scope(q["scope"], owner=self.owner_for(q, write=True))
        return Response(status=status.HTTP_204_NO_CONTENT)
