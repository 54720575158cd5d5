"""REST views over approval rules.

Creating, changing and deleting a rule takes ``agentstate.change_approvalrule``;
reading rules takes ``view_approvalrule``, ``change_approvalrule`` or
``agentstate.decide_approvalrequest`` (reviewers see the rules they decide
under). Each is checked before anything else: 403 without it.
"""

from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from agentstate.exceptions import RuleNotFound
from agentstate.models import ApprovalRule
from agentstate.services import oversight

from ..access import has_any_perm, require
from ..base import AgentStateAPIView
from ..ids import path_id
from ..schema import PAGES, documented
from . import serializers as s

RULE_ID = OpenApiParameter("id", int, OpenApiParameter.PATH)
MANAGE = "Managing approval rules takes agentstate.change_approvalrule."
READ = (
    "Reading approval rules takes agentstate.view_approvalrule, change_approvalrule"
    " or decide_approvalrequest."
)


def rule_id(text: str) -> int:
    """The rule id the path names (``path_id``); anything else names none."""
    pk = path_id(text)
    if pk is None:
        raise RuleNotFound.of(rule_id=text)
    return pk


def _values(data: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in data.items() if name != "tool_name"}


class RuleAPIView(AgentStateAPIView):
    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if request.method in ("GET", "HEAD", "OPTIONS"):
            if not has_any_perm(
                request.user, "view_approvalrule", "change_approvalrule", "decide_approvalrequest"
            ):
                raise PermissionDenied(READ)
        else:
            require(request.user, "change_approvalrule", MANAGE)


class RulesView(RuleAPIView):
    @documented(
        parameters=[s.RuleQuery, *PAGES],
        responses=s.RuleSerializer(many=True),
        operation_id="approval_rules_list",
    )
    def get(self, request: Request) -> Response:
        q = self.query(s.RuleQuery)
        rows = oversight.rules(tool_name=q.get("tool_name"))
        return self.paginate(rows.order_by("tool_name", "pk"), s.RuleSerializer)

    @documented(
        request=s.RuleCreate,
        responses={201: s.RuleSerializer},
        operation_id="approval_rules_create",
    )
    def post(self, request: Request) -> Response:
        d = self.validated(s.RuleCreate, request.data)
        rule = oversight.create_rule(d["tool_name"], by=request.user, **_values(d))
        return Response(s.RuleSerializer(_read(rule.pk)).data, status=status.HTTP_201_CREATED)


def _read(pk: int) -> ApprovalRule:
    rule = oversight.rules().filter(pk=pk).first()
    if rule is None:
        raise RuleNotFound.of(rule_id=pk)
    return rule


class RuleView(RuleAPIView):
    @documented(parameters=[RULE_ID], responses=s.RuleSerializer, operation_id="approval_rules_get")
    def get(self, request: Request, id: str) -> Response:  # the documented path parameter
        return Response(s.RuleSerializer(_read(rule_id(id))).data)

    @documented(
        parameters=[RULE_ID],
        request=s.RuleWrite,
        responses=s.RuleSerializer,
        operation_id="approval_rules_update",
    )
    def patch(self, request: Request, id: str) -> Response:
        d = self.validated(s.RuleWrite, request.data)
        rule = oversight.change_rule(rule_id(id), by=request.user, **d)
        return Response(s.RuleSerializer(_read(rule.pk)).data)

    @documented(
        parameters=[RULE_ID],
        request=None,
        responses={204: None},
        operation_id="approval_rules_delete",
    )
    def delete(self, request: Request, id: str) -> Response:
        oversight.delete_rule(rule_id(id), by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
