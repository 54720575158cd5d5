"""REST views over runs, usage, approval records and the review queue
(docs/rest-api.md).

Access: a caller sees and changes the runs it created (every run with
``view_run`` / ``change_run``) and sees the approval requests it filed
(every one with ``view_approvalrequest`` or ``decide_approvalrequest``);
anything else answers 404, like a missing object. Deciding takes
``agentstate.decide_approvalrequest``, checked before anything else, and
reaches every request. Each view is a thin call of one service.
"""

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from agentstate.exceptions import ApprovalRequestNotFound
from agentstate.models import ApprovalRequest, Run
from agentstate.services import approvals, runs
from agentstate.validation import check_run_id

from . import serializers_runs as s
from .base import AgentStateAPIView
from .permissions import has_model_perm
from .schema import documented

RUN_ID = OpenApiParameter("run_id", str, OpenApiParameter.PATH)
REQUEST_ID = OpenApiParameter("id", int, OpenApiParameter.PATH)
PAGES = [OpenApiParameter("page", int), OpenApiParameter("page_size", int)]


def find_run(run_id: str, rows: QuerySet[Run]) -> Run:
    """The run named in the path, among ``rows``.

    A run id the rules do not allow (U+0000 included) is bad input, a 400
    naming ``run_id``, and never reaches the database.
    """
    return runs.get_run(check_run_id(run_id), rows)


def visible_runs(user) -> QuerySet[Run]:
    if has_model_perm(user, "view_run") or has_model_perm(user, "change_run"):
        return Run.objects.all()
    return Run.objects.filter(created_by=user)


def changeable_runs(user) -> QuerySet[Run]:
    if has_model_perm(user, "change_run"):
        return Run.objects.all()
    return Run.objects.filter(created_by=user)


def visible_requests(user) -> QuerySet[ApprovalRequest]:
    """A reviewer (``decide_approvalrequest``) sees the queue it decides."""
    requests = approvals.with_current_status(
        ApprovalRequest.objects.select_related("run", "decided_by")
    )
    if has_model_perm(user, "view_approvalrequest") or has_model_perm(
        user, "decide_approvalrequest"
    ):
        return requests
    return requests.filter(created_by=user)


class RunsView(AgentStateAPIView):
    @documented(
        request=s.RunCreateRequest, responses={201: s.RunSerializer}, operation_id="runs_create"
    )
    def post(self, request):
        d = self.validated(s.RunCreateRequest, request.data)
        run = runs.create_run(d.get("run_id"), d.get("context"), user=request.user)
        return Response(runs.to_json(run), status=status.HTTP_201_CREATED)


class RunView(AgentStateAPIView):
    @documented(parameters=[RUN_ID], responses=s.RunSerializer, operation_id="runs_get")
    def get(self, request, run_id: str):
        return Response(runs.to_json(find_run(run_id, visible_runs(request.user))))

    @documented(
        parameters=[RUN_ID],
        request=s.RunUpdateRequest,
        responses=s.RunSerializer,
        operation_id="runs_update",
    )
    def patch(self, request, run_id: str):
        run = find_run(run_id, changeable_runs(request.user))
        d = self.validated(s.RunUpdateRequest, request.data)
        if "context" in d:
            run = runs.update_run(run, d["context"])
        return Response(runs.to_json(run))


class UsageView(AgentStateAPIView):
    @documented(
        parameters=[RUN_ID],
        request=s.UsageRequest,
        responses=s.UsageSerializer,
        operation_id="runs_usage_add",
    )
    def post(self, request, run_id: str):
        run = find_run(run_id, changeable_runs(request.user))
        d = self.validated(s.UsageRequest, request.data)
        return Response(runs.add_usage(run, **d))


class ApprovalsView(AgentStateAPIView):
    @documented(
        parameters=[RUN_ID, s.ApprovalQuery],
        responses={200: OpenApiTypes.OBJECT},
        description="With tool_name and call_id: {tool_name, call_id, approved: true, false or null}. "
        "Without: the records map {tool: {approved, rejected}}.",
        operation_id="runs_approvals_get",
    )
    def get(self, request, run_id: str):
        q = self.query(s.ApprovalQuery)
        run = find_run(run_id, visible_runs(request.user))
        if not q:
            return Response(runs.records(run))
        approved = runs.is_tool_approved(run, q["tool_name"], q["call_id"])
        return Response(
            {"tool_name": q["tool_name"], "call_id": q["call_id"], "approved": approved}
        )

    @documented(
        parameters=[RUN_ID],
        request={"application/json": s.RECORDS_SCHEMA},
        responses={200: s.RECORDS_SCHEMA},
        operation_id="runs_approvals_rebuild",
    )
    def put(self, request, run_id: str):
        run = find_run(run_id, changeable_runs(request.user))
        return Response(runs.rebuild_approvals(run, request.data, user=request.user))


class ApprovalChangeView(AgentStateAPIView):
    """``approve/`` and ``reject/``: one call, or every call with ``always``."""

    change = None  # runs.approve or runs.reject

    def post(self, request, run_id: str):
        run = find_run(run_id, changeable_runs(request.user))
        d = self.validated(s.ApprovalChangeRequest, request.data)
        return Response(
            self.change(run, d["tool_name"], d["call_id"], d["always"], user=request.user)
        )


class ApproveView(ApprovalChangeView):
    change = staticmethod(runs.approve)

    @documented(
        parameters=[RUN_ID],
        request=s.ApprovalChangeRequest,
        responses={200: s.RECORDS_SCHEMA},
        operation_id="runs_approvals_approve",
    )
    def post(self, request, run_id: str):
        return super().post(request, run_id)


class RejectView(ApprovalChangeView):
    change = staticmethod(runs.reject)

    @documented(
        parameters=[RUN_ID],
        request=s.ApprovalChangeRequest,
        responses={200: s.RECORDS_SCHEMA},
        operation_id="runs_approvals_reject",
    )
    def post(self, request, run_id: str):
        return super().post(request, run_id)


def _shown(request: ApprovalRequest) -> dict:
    """The request as a listing shows it (current status by the database clock)."""
    current = approvals.with_current_status(
        ApprovalRequest.objects.select_related("run", "decided_by")
    )
    return s.ApprovalRequestSerializer(current.get(pk=request.pk)).data


class RunApprovalRequestsView(AgentStateAPIView):
    @documented(
        parameters=[RUN_ID],
        request=s.ApprovalRequestCreate,
        responses={201: s.ApprovalRequestSerializer, 200: s.ApprovalRequestSerializer},
        operation_id="runs_approval_requests_create",
    )
    def post(self, request, run_id: str):
        run = find_run(run_id, changeable_runs(request.user))
        d = self.validated(s.ApprovalRequestCreate, request.data)
        filed, created = approvals.ensure_request(
            run, d["tool_name"], d["call_id"], d.get("arguments"), user=request.user
        )
        return Response(
            _shown(filed), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


class ApprovalRequestsView(AgentStateAPIView):
    @documented(
        parameters=[s.ApprovalRequestQuery, *PAGES],
        responses=s.ApprovalRequestSerializer(many=True),
        operation_id="approval_requests_list",
    )
    def get(self, request):
        q = self.query(s.ApprovalRequestQuery)
        rows = visible_requests(request.user)
        if "status" in q:
            rows = rows.filter(approvals.in_status(q["status"]))
        if "tool_name" in q:
            rows = rows.filter(tool_name=q["tool_name"])
        if "run_id" in q:
            rows = rows.filter(run__run_id=q["run_id"])
        return self.paginate(rows.order_by("created_at", "pk"), s.ApprovalRequestSerializer)


def _find(rows: QuerySet[ApprovalRequest], pk: str) -> ApprovalRequest:
    """The request with id ``pk`` (the path's text: one that is no id is not found)."""
    is_id = pk.isascii() and pk.isdigit() and len(pk) <= 20
    found = rows.filter(pk=int(pk)).first() if is_id else None
    if found is None:
        raise ApprovalRequestNotFound(f"Approval request {pk} not found.")
    return found


class ApprovalRequestView(AgentStateAPIView):
    @documented(
        parameters=[REQUEST_ID],
        responses=s.ApprovalRequestSerializer,
        operation_id="approval_requests_get",
    )
    def get(self, request, id: str):  # the path parameter as documented
        return Response(s.ApprovalRequestSerializer(_find(visible_requests(request.user), id)).data)


class DecideView(AgentStateAPIView):
    @documented(
        parameters=[REQUEST_ID],
        request=s.DecideRequest,
        responses=s.ApprovalRequestSerializer,
        operation_id="approval_requests_decide",
    )
    def post(self, request, id: str):  # the path parameter as documented
        if not request.user.has_perm("agentstate.decide_approvalrequest"):
            raise PermissionDenied(
                "Deciding approval requests takes agentstate.decide_approvalrequest."
            )
        d = self.validated(s.DecideRequest, request.data)
        found = _find(ApprovalRequest.objects.all(), id)
        decided = approvals.decide(
            found, d["decision"], d["always"], by=request.user, reason=d["reason"]
        )
        return Response(_shown(decided))
