"""REST views over budgets: a run's, and a user's over every run the user created.

Reading a run's budget takes seeing the run (its creator, ``view_run`` or
``change_run``, and ``view_budget`` / ``change_budget``); another's answers
404 like a missing run. Reading a user's budget: the user itself, or
``view_budget`` / ``change_budget``. Setting either takes
``agentstate.change_budget``, checked before anything else (403), and reaches
every run and user. Each request is one service call, one operation of the
backend.
"""

from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from agentstate.services import budgets

from . import serializers_budgets as s
from .base import AgentStateAPIView
from .permissions import has_model_perm
from .schema import documented
from .views_runs import RUN_ID, RunAPIView, reach

USERNAME = OpenApiParameter("username", str, OpenApiParameter.PATH)


def _may_set(user: Any) -> None:
    if not has_model_perm(user, "change_budget"):
        raise PermissionDenied("Setting a budget takes agentstate.change_budget.")


class RunBudgetView(RunAPIView):
    @documented(
        parameters=[RUN_ID], responses=s.RunBudgetSerializer, operation_id="runs_budget_get"
    )
    def get(self, request: Request, run_id: str) -> Response:
        sees = reach(request.user, "view_run", "change_run", "view_budget", "change_budget")
        state = budgets.run_budget(run_id, reach=sees)
        return Response(s.RunBudgetSerializer(budgets.as_json(state)).data)

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
        return Response(s.RunBudgetSerializer(budgets.as_json(state)).data)


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
        if not (
            username == user.get_username()
            or has_model_perm(user, "view_budget")
            or has_model_perm(user, "change_budget")
        ):
            raise PermissionDenied(
                "Reading another user's budget takes agentstate.view_budget or change_budget."
            )
        state = budgets.user_budget(username)
        return Response(s.UserBudgetSerializer(budgets.as_json(state)).data)

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
        return Response(s.UserBudgetSerializer(budgets.as_json(state)).data)
