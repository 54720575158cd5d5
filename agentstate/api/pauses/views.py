"""REST views over paused runs: ``/api/pauses/`` and its claim, resolve and cancel.

Access: a caller sees the pauses it created or owns (all of them with
``view_pausedrun`` or ``change_pausedrun``) and may resolve or cancel the
same ones (all with ``change_pausedrun``); anything else answers 404, like a
missing pause. A caller claims as itself; ``change_pausedrun`` lets it name
the owner it claims for, ``add_pausedrun`` the owner it creates for.
"""

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from agentstate.models import PausedRun
from agentstate.services import pauses

from ..access import acting_username, reach, visible_pauses
from ..base import AgentStateAPIView, represent
from ..schema import PAGES, documented
from . import serializers as s

# The pauses a caller may replace, resolve or cancel: every one with
# change_pausedrun, else its own (the operation checks it in its own statement).
CHANGE = "change_pausedrun"


class PausesView(AgentStateAPIView):
    @documented(
        parameters=[
            s.PauseQuery,
            *PAGES,
        ],
        responses=s.PauseSerializer(many=True),
        operation_id="pauses_list",
    )
    def get(self, request: Request) -> Response:
        filters = self.query(s.PauseQuery)
        seen = visible_pauses(request.user)

        def fetch(offset: int, limit: int) -> tuple[list[PausedRun], int]:
            page = pauses.pauses_page(reach=seen, offset=offset, limit=limit, **filters)
            return page.rows, page.total

        return self.paginate_fetched(fetch, s.PauseSerializer)

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
            acting_username(request, d["owner"], "add_pausedrun"),
            d["payload"],
            d.get("ttl_seconds"),
            by=request.user,
            reach=reach(request.user, CHANGE),
        )
        return Response(represent(s.PauseSerializer, pause), status=status.HTTP_201_CREATED)


class ClaimView(AgentStateAPIView):
    @documented(
        request=s.PauseClaimRequest, responses=s.PauseSerializer, operation_id="pauses_claim"
    )
    def post(self, request: Request) -> Response:
        d = self.validated(s.PauseClaimRequest, request.data)
        pause = pauses.claim_pause(
            d["chat_id"],
            d["tool_call_id"],
            acting_username(request, d.get("owner"), CHANGE),
            d["question_id"],
            by=request.user,
        )
        return Response(represent(s.PauseSerializer, pause))


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
            reach=reach(request.user, CHANGE),
        )
        return Response(represent(s.PauseSerializer, pause))


class CancelView(AgentStateAPIView):
    @documented(request=s.PauseKeyRequest, responses={204: None}, operation_id="pauses_cancel")
    def post(self, request: Request) -> Response:
        d = self.validated(s.PauseKeyRequest, request.data)
        pauses.cancel(
            d["chat_id"],
            d["tool_call_id"],
            by=request.user,
            reach=reach(request.user, CHANGE),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
