"""REST views over paused runs: ``/api/pauses/`` and its claim, resolve and cancel.

Access: a caller sees the pauses it created or owns (all of them with
``view_pausedrun`` or ``change_pausedrun``) and may resolve or cancel the
same ones (all with ``change_pausedrun``); anything else answers 404, like a
missing pause. A caller claims as itself; ``change_pausedrun`` lets it name
the owner it claims for, ``add_pausedrun`` the owner it creates for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from agentstate.backends import Reach
from agentstate.models import PausedRun
from agentstate.services import pauses

from . import serializers_pauses as s
from .base import AgentStateAPIView
from .permissions import has_model_perm
from .schema import documented

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser


def _own(user: _AnyUser) -> QuerySet[PausedRun]:
    return PausedRun.objects.filter(Q(created_by=user) | Q(owner=user.get_username()))


def visible_pauses(user: _AnyUser) -> QuerySet[PausedRun]:
    """The pauses ``user`` may see."""
    if has_model_perm(user, "view_pausedrun") or has_model_perm(user, "change_pausedrun"):
        return PausedRun.objects.all()
    return _own(user)


def changing_reach(user: _AnyUser) -> Reach | None:
    """The pauses ``user`` may replace, resolve or cancel, for the operation to check
    in its own statement: every one with ``change_pausedrun``, else its own."""
    if has_model_perm(user, "change_pausedrun"):
        return None
    return Reach(user.pk, user.get_username())


def acting_owner(request: Request, owner: str | None, codename: str) -> str:
    """The owner a request acts for: the caller, or ``owner`` with ``codename``.

    An owner is a principal id, not necessarily a user of this site, so a
    named one is taken as given (unlike scopes' ``named_owner``).
    """
    me = request.user.get_username()
    if owner is None or owner == me:
        return me
    if not has_model_perm(request.user, codename):
        raise PermissionDenied(f"You may not act for another owner without agentstate.{codename}.")
    return owner


class PausesView(AgentStateAPIView):
    @documented(
        parameters=[
            s.PauseQuery,
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int),
        ],
        responses=s.PauseSerializer(many=True),
        operation_id="pauses_list",
    )
    def get(self, request: Request) -> Response:
        q = self.query(s.PauseQuery)
        rows = pauses.with_current_status(visible_pauses(request.user))
        rows = rows.filter(
            **{name: q[name] for name in ("owner", "chat_id", "tool_call_id") if name in q}
        )
        if "status" in q:
            rows = rows.filter(pauses.in_status(q["status"]))
        return self.paginate(rows.order_by("-created_at", "-pk"), s.PauseSerializer)

    @documented(
        request=s.PauseCreateRequest,
        responses={201: s.PauseSerializer},
        operation_id="pauses_create",
    )
    def post(self, request: Request) -> Response:
        d = self.validated(s.PauseCreateRequest, request.data)
        pause = pauses.put_pause(
            d["chat_id"],
            d["tool_call_id"],
            acting_owner(request, d["owner"], "add_pausedrun"),
            d["payload"],
            d.get("ttl_seconds"),
            by=request.user,
            reach=changing_reach(request.user),
        )
        return Response(s.PauseSerializer(pause).data, status=status.HTTP_201_CREATED)


class ClaimView(AgentStateAPIView):
    @documented(
        request=s.PauseClaimRequest, responses=s.PauseSerializer, operation_id="pauses_claim"
    )
    def post(self, request: Request) -> Response:
        d = self.validated(s.PauseClaimRequest, request.data)
        pause = pauses.claim_pause(
            d["chat_id"],
            d["tool_call_id"],
            acting_owner(request, d.get("owner"), "change_pausedrun"),
            d["question_id"],
            by=request.user,
        )
        return Response(s.PauseSerializer(pause).data)


class ResolveView(AgentStateAPIView):
    @documented(
        request=s.PauseKeyRequest, responses=s.PauseSerializer, operation_id="pauses_resolve"
    )
    def post(self, request: Request) -> Response:
        d = self.validated(s.PauseKeyRequest, request.data)
        pause = pauses.resolve(
            d["chat_id"],
            d["tool_call_id"],
            by=request.user,
            reach=changing_reach(request.user),
        )
        return Response(s.PauseSerializer(pause).data)


class CancelView(AgentStateAPIView):
    @documented(request=s.PauseKeyRequest, responses={204: None}, operation_id="pauses_cancel")
    def post(self, request: Request) -> Response:
        d = self.validated(s.PauseKeyRequest, request.data)
        pauses.cancel(
            d["chat_id"],
            d["tool_call_id"],
            by=request.user,
            reach=changing_reach(request.user),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
