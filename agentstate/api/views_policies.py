"""REST views over approval policies: every endpoint takes ``agentstate.decide_approvalrequest``,
as deciding does (a policy decides requests)."""

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
from agentstate.services import approvals

from . import serializers_policies as s
from .base import AgentStateAPIView
from .permissions import has_model_perm
from .schema import documented

POLICY_ID = OpenApiParameter("id", int, OpenApiParameter.PATH)
PAGES = [OpenApiParameter("page", int), OpenApiParameter("page_size", int)]


def named(policies: QuerySet[ApprovalPolicy]) -> QuerySet[ApprovalPolicy]:
    """Annotated with ``user_name`` and ``created_by_name``, in the listing's one query."""
    username = get_user_model().USERNAME_FIELD
    return policies.annotate(
        user_name=F(f"user__{username}"), created_by_name=F(f"created_by__{username}")
    )


def policy_id(text: str) -> int:
    """The policy id the path names (up to 18 digits; anything else names none)."""
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise PolicyNotFound.of(policy_id=text)
    return int(text)


class PolicyPermissionMixin(AgentStateAPIView):
    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if not has_model_perm(request.user, "decide_approvalrequest"):
            raise PermissionDenied("Approval policies take agentstate.decide_approvalrequest.")


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
        return Response(s.ApprovalPolicySerializer(policy).data, status=status.HTTP_201_CREATED)


class RevokeView(PolicyPermissionMixin):
    @documented(
        parameters=[POLICY_ID],
        request=None,
        responses=s.ApprovalPolicySerializer,
        operation_id="approval_policies_revoke",
    )
    def post(self, request: Request, id: str) -> Response:  # the documented path parameter
        policy = approvals.revoke_policy(policy_id(id), by=request.user)
        return Response(s.ApprovalPolicySerializer(policy).data)
