"""REST views over runs, usage, approval records and the review queue.

Access: a caller sees and changes the runs it created (every run with
``view_run`` / ``change_run``) and sees the approval requests it filed
(every one with ``view_approvalrequest`` or ``decide_approvalrequest``);
anything else answers 404, like a missing object. Deciding takes
``agentstate.decide_approvalrequest``, checked before anything else, and
reaches every request.

Each endpoint on a run is one service call, which is one operation of the
backend: the caller's reach goes into it (``Reach``: the runs it created;
``None`` with the model permission), so the run is found, checked and
changed in one round trip, and the response is built from what it returned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from agentstate.exceptions import ApprovalRequestNotFound
from agentstate.models import ApprovalRequest
from agentstate.services import approvals, oversight, runs, waiting
from agentstate.types import Reach, Records
from agentstate.validation import check_run_id

from ..access import reach, require, visible_requests
from ..base import AgentStateAPIView, represent
from ..fields import RUN_ID_PATTERN
from ..ids import path_id
from ..schema import PAGES, WAIT, documented
from ..waiting import Waiting, wait_param
from . import serializers as s

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser

RUN_ID = OpenApiParameter("run_id", str, OpenApiParameter.PATH, pattern=RUN_ID_PATTERN)
REQUEST_ID = OpenApiParameter("id", int, OpenApiParameter.PATH)


def viewing(user: _AnyUser) -> Reach | None:
    return reach(user, "view_run", "change_run")


def changing(user: _AnyUser) -> Reach | None:
    return reach(user, "change_run")


def _requests(user: _AnyUser) -> QuerySet[ApprovalRequest]:
    """The requests ``user`` may see, each with its current status and its run."""
    return approvals.with_current_status(
        visible_requests(user).select_related("run", "decided_by")
    ).prefetch_related("votes__by")


class RunAPIView(AgentStateAPIView):
    """A view of ``/runs/{run_id}/...``: a run id the rules do not allow (U+0000
    included) is bad input, a 400 naming ``run_id``, and never reaches the database."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        check_run_id(kwargs["run_id"])


class RunsView(AgentStateAPIView):
    @documented(
        request=s.RunCreateRequest, responses={201: s.RunSerializer}, operation_id="runs_create"
    )
    def post(self, request: Request) -> Response:
        d = self.validated(s.RunCreateRequest, request.data)
        run = runs.create_run(d.get("run_id"), d.get("context"), user=request.user)
        return Response(runs.as_json(run), status=status.HTTP_201_CREATED)


class RunView(RunAPIView):
    @documented(parameters=[RUN_ID, WAIT], responses=s.RunSerializer, operation_id="runs_get")
    def get(self, request: Request, run_id: str) -> Response:
        wait = wait_param(request)
        user = request.user
        if wait is None:
            return Response(runs.to_json(run_id, reach=viewing(user)))

        def read() -> tuple[dict[str, Any], Any]:
            answer = runs.to_json(run_id, reach=viewing(user))
            requests, again = waiting.run_state(_requests(user), run_id)
            return answer, ((answer["approvals"], requests), again)

        _, (before, _) = read()  # a run the caller may not see: 404 at once
        return Waiting(
            waiting.run_check(read, before),
            waiting.run_notice(run_id),
            wait,
            lambda answer: answer,
            key=("run", user.pk, run_id),
        )

    @documented(
        parameters=[RUN_ID],
        request=s.RunUpdateRequest,
        responses=s.RunSerializer,
        operation_id="runs_update",
    )
    def patch(self, request: Request, run_id: str) -> Response:
        d = self.validated(s.RunUpdateRequest, request.data)
        if "context" not in d:  # a partial update of nothing
            return Response(runs.to_json(run_id, reach=changing(request.user)))
        run = runs.update_run(run_id, d["context"], reach=changing(request.user))
        return Response(runs.as_json(run))


class UsageView(RunAPIView):
    @documented(
        parameters=[RUN_ID],
        request=s.UsageRequest,
        responses={200: s.UsageSerializer, 409: s.BudgetExceededSerializer},
        operation_id="runs_usage_add",
    )
    def post(self, request: Request, run_id: str) -> Response:
        d = self.validated(s.UsageRequest, request.data)
        return Response(runs.add_usage(run_id, **d, reach=changing(request.user)))


class ApprovalsView(RunAPIView):
    @documented(
        parameters=[RUN_ID, s.ApprovalQuery],
        responses={200: OpenApiTypes.OBJECT},
        description="With tool_name and call_id: {tool_name, call_id, approved: true, false or null}. "
        "Without: the records map {tool: {approved, rejected}}.",
        operation_id="runs_approvals_get",
    )
    def get(self, request: Request, run_id: str) -> Response:
        q = self.query(s.ApprovalQuery)
        if not q:
            return Response(runs.records(run_id, reach=viewing(request.user)))
        approved, why = runs.verdict(
            run_id,
            q["tool_name"],
            q["call_id"],
            digest=q.get("arguments_digest"),
            reach=viewing(request.user),
        )
        answer = {"tool_name": q["tool_name"], "call_id": q["call_id"], "approved": approved}
        return Response(answer if why is None else {**answer, "reason": why})

    @documented(
        parameters=[RUN_ID],
        request={"application/json": s.RECORDS_SCHEMA},
        responses={200: s.RECORDS_SCHEMA},
        operation_id="runs_approvals_rebuild",
    )
    def put(self, request: Request, run_id: str) -> Response:
        return Response(
            runs.rebuild_approvals(
                run_id, request.data, by=request.user, reach=changing(request.user)
            )
        )


class ConsumeView(RunAPIView):
    """Use a call's approval once, for the arguments about to run."""

    @documented(
        parameters=[RUN_ID],
        request=s.ConsumeRequest,
        responses=s.ConsumedSerializer,
        operation_id="runs_approvals_consume",
    )
    def post(self, request: Request, run_id: str) -> Response:
        d = self.validated(s.ConsumeRequest, request.data)
        used = oversight.consume(
            run_id,
            d["tool_name"],
            d["call_id"],
            digest=d["arguments_digest"],
            by=request.user,
            reach=changing(request.user),
        )
        return Response(s.ConsumedSerializer(used).data)


class ApprovalChangeView(RunAPIView):
    """``approve/`` and ``reject/``: one call, or every call with ``always``."""

    change: ClassVar[Callable[..., Records]]  # runs.approve or runs.reject

    def post(self, request: Request, run_id: str) -> Response:
        d = self.validated(s.ApprovalChangeRequest, request.data)
        return Response(
            self.change(
                run_id,
                d["tool_name"],
                d["call_id"],
                d["always"],
                by=request.user,
                reach=changing(request.user),
            )
        )


class ApproveView(ApprovalChangeView):
    change = staticmethod(runs.approve)

    @documented(
        parameters=[RUN_ID],
        request=s.ApprovalChangeRequest,
        responses={200: s.RECORDS_SCHEMA},
        operation_id="runs_approvals_approve",
    )
    def post(self, request: Request, run_id: str) -> Response:
        return super().post(request, run_id)


class RejectView(ApprovalChangeView):
    change = staticmethod(runs.reject)

    @documented(
        parameters=[RUN_ID],
        request=s.ApprovalChangeRequest,
        responses={200: s.RECORDS_SCHEMA},
        operation_id="runs_approvals_reject",
    )
    def post(self, request: Request, run_id: str) -> Response:
        return super().post(request, run_id)


class RunApprovalRequestsView(RunAPIView):
    @documented(
        parameters=[RUN_ID],
        request=s.ApprovalRequestCreate,
        responses={201: s.ApprovalRequestSerializer, 200: s.ApprovalRequestSerializer},
        operation_id="runs_approval_requests_create",
    )
    def post(self, request: Request, run_id: str) -> Response:
        d = self.validated(s.ApprovalRequestCreate, request.data)
        filed, created = approvals.ensure_request(
            run_id,
            d["tool_name"],
            d["call_id"],
            d.get("arguments"),
            by=request.user,
            reach=changing(request.user),
        )
        return Response(
            represent(s.ApprovalRequestSerializer, filed),
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class ApprovalRequestsView(AgentStateAPIView):
    @documented(
        parameters=[s.ApprovalRequestQuery, *PAGES],
        responses=s.ApprovalRequestSerializer(many=True),
        operation_id="approval_requests_list",
    )
    def get(self, request: Request) -> Response:
        filters = self.query(s.ApprovalRequestQuery)
        seen = reach(request.user, "view_approvalrequest", "decide_approvalrequest")

        def fetch(offset: int, limit: int) -> tuple[list[ApprovalRequest], int]:
            page = approvals.requests_page(reach=seen, offset=offset, limit=limit, **filters)
            return page.rows, page.total

        return self.paginate_fetched(fetch, s.ApprovalRequestSerializer)


def request_id(text: str) -> int:
    """The request id the path names (``path_id``); anything else names none."""
    pk = path_id(text)
    if pk is None:
        raise ApprovalRequestNotFound.of(id=text)
    return pk


class ApprovalRequestView(AgentStateAPIView):
    @documented(
        parameters=[REQUEST_ID, WAIT],
        responses=s.ApprovalRequestSerializer,
        operation_id="approval_requests_get",
    )
    def get(self, request: Request, id: str) -> Response:  # the documented path parameter
        wait = wait_param(request)
        pk = request_id(id)
        if wait is None:
            reviewer = reach(request.user, "view_approvalrequest", "decide_approvalrequest")
            found = approvals.approval_request(pk, reach=reviewer)
            if found is None:
                raise ApprovalRequestNotFound.of(id=id)
            return Response(represent(s.ApprovalRequestSerializer, found))

        def answer(found: ApprovalRequest | None) -> Any:
            if found is None:
                raise ApprovalRequestNotFound.of(id=id)
            return represent(s.ApprovalRequestSerializer, found)

        check = waiting.request_check(_requests(request.user), pk)
        return Waiting(
            check, waiting.request_notice(pk), wait, answer, key=("request", request.user.pk, pk)
        )


class DecideView(AgentStateAPIView):
    @documented(
        parameters=[REQUEST_ID],
        request=s.DecideRequest,
        responses=s.ApprovalRequestSerializer,
        operation_id="approval_requests_decide",
    )
    def post(self, request: Request, id: str) -> Response:  # the documented path parameter
        require(
            request.user,
            "decide_approvalrequest",
            "Deciding approval requests takes agentstate.decide_approvalrequest.",
        )
        d = self.validated(s.DecideRequest, request.data)
        decided = approvals.decide(
            request_id(id),
            d["decision"],
            d["always"],
            by=request.user,
            reason=d["reason"],
            arguments=d["arguments"],
        )
        return Response(represent(s.ApprovalRequestSerializer, decided))
