"""REST views over approval policies and budgets.

Every approval-policy endpoint takes ``agentstate.decide_approvalrequest``, as
deciding does (a policy decides requests).

Reading a run's budget takes seeing the run (its creator, ``view_run`` or
``change_run``, and ``view_budget`` / ``change_budget``); another's answers
404 like a missing run. Reading a user's budget: the user itself, or
``view_budget`` / ``change_budget``. Setting either takes
``agentstate.change_budget``, checked before anything else (403), and reaches
every run and user. Each request is one service call, one operation of the
backend.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import F, QuerySet
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from agentstate.exceptions import PolicyNotFound
from agentstate.models import ApprovalPolicy
from agentstate.services import approvals, budgets

from ..access import has_any_perm, reach, require
from ..base import AgentStateAPIView, represent
from ..fields import TEXT_PATTERN
from ..ids import path_id
from ..runs.views import RUN_ID, RunAPIView
from ..schema import PAGES, documented
from . import serializers as s

POLICY_ID = OpenApiParameter("id", int, OpenApiParameter.PATH)
USERNAME = OpenApiParameter("username", str, OpenApiParameter.PATH, pattern=TEXT_PATTERN)


def named(policies: QuerySet[ApprovalPolicy]) -> QuerySet[ApprovalPolicy]:
    """Annotated with ``user_name`` and ``created_by_name``, in the listing's one query."""
    username = get_user_model().USERNAME_FIELD
    return policies.annotate(
        user_name=F(f"user__{username}"), created_by_name=F(f"created_by__{username}")
    )


def policy_id(text: str) -> int:
    """The policy id the path names (``path_id``); anything else names none."""
    pk = path_id(text)
    if pk is None:
        raise PolicyNotFound.of(policy_id=text)
    return pk


class PolicyPermissionMixin(AgentStateAPIView):
    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        require(
            request.user,
            "decide_approvalrequest",
            "Approval policies take agentstate.decide_approvalrequest.",
        )


class PoliciesView(PolicyPermissionMixin):
    @documented(
        parameters=[s.PolicyQuery, *PAGES],
        responses=s.ApprovalPolicySerializer(many=True),
        operation_id="approval_policies_list",
    )
    def get(self, request: Request) -> Response:
        q = self.query(s.PolicyQuery)
        active = {"true": True, "false": False}.get(q.get("active", ""))
        rows = approvals.policies(tool_name=q.get("tool_name"), user=q.get("user"), active=active)
        return self.paginate(named(rows).order_by("-created_at", "-pk"), s.ApprovalPolicySerializer)

    @documented(
        request=s.PolicyCreate,
        responses={201: s.ApprovalPolicySerializer},
        operation_id="approval_policies_create",
    )
    def post(self, request: Request) -> Response:
        d = self.validated(s.PolicyCreate, request.data)
        policy = approvals.create_policy(
            d["tool_name"],
            d["decision"],
            user=d["user"],
            arguments=d["arguments"],
            expires_at=d["expires_at"],
            reason=d["reason"],
            by=request.user,
        )
        return Response(
            represent(s.ApprovalPolicySerializer, policy), status=status.HTTP_201_CREATED
        )


class RevokeView(PolicyPermissionMixin):
    @documented(
        parameters=[POLICY_ID],
        request=None,
        responses=s.ApprovalPolicySerializer,
        operation_id="approval_policies_revoke",
    )
    def post(self, request: Request, id: str) -> Response:  # the documented path parameter
        policy = approvals.revoke_policy(policy_id(id), by=request.user)
        return Response(represent(s.ApprovalPolicySerializer, policy))


# Budgets


def _may_set(user: Any) -> None:
    require(user, "change_budget", "Setting a budget takes agentstate.change_budget.")


class RunBudgetView(RunAPIView):
    @documented(
        parameters=[RUN_ID], responses=s.RunBudgetSerializer, operation_id="runs_budget_get"
    )
    def get(self, request: Request, run_id: str) -> Response:
        sees = reach(request.user, "view_run", "change_run", "view_budget", "change_budget")
        state = budgets.run_budget(run_id, reach=sees)
        return Response(represent(s.RunBudgetSerializer, budgets.as_json(state)))

    @documented(
        parameters=[RUN_ID],
        request=s.RunBudgetRequest,
        responses=s.RunBudgetSerializer,
        description="Set the caps the body names (null removes one; a counter left out keeps"
        " its cap). Takes agentstate.change_budget.",
        operation_id="runs_budget_set",
    )
    def put(self, request: Request, run_id: str) -> Response:
        _may_set(request.user)
        caps = self.validated(s.RunBudgetRequest, request.data)
        state = budgets.set_run_budget(run_id, caps, by=request.user)
        return Response(represent(s.RunBudgetSerializer, budgets.as_json(state)))


class UserBudgetView(AgentStateAPIView):
    @documented(
        parameters=[USERNAME],
        responses=s.UserBudgetSerializer,
        description="The user's budget over every run the user created, as it stands now."
        " A user may read their own; another's takes agentstate.view_budget or change_budget.",
        operation_id="users_budget_get",
    )
    def get(self, request: Request, username: str) -> Response:
        user = request.user
        if username != user.get_username() and not has_any_perm(
            user, "view_budget", "change_budget"
        ):
            raise PermissionDenied(
                "Reading another user's budget takes agentstate.view_budget or change_budget."
            )
        state = budgets.user_budget(username)
        return Response(represent(s.UserBudgetSerializer, budgets.as_json(state)))

    @documented(
        parameters=[USERNAME],
        request=s.UserBudgetRequest,
        responses=s.UserBudgetSerializer,
        description="Set the caps the body names, and the period if given (a change of period"
        " starts a new one, counted from 0). Takes agentstate.change_budget.",
        operation_id="users_budget_set",
    )
    def put(self, request: Request, username: str) -> Response:
        _may_set(request.user)
        d = dict(self.validated(s.UserBudgetRequest, request.data))
        period = d.pop("period", budgets.KEEP)
        state = budgets.set_user_budget(username, d, period=period, by=request.user)
        return Response(represent(s.UserBudgetSerializer, budgets.as_json(state)))
