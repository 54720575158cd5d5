"""A bridge's storage inside the Django site: ``ServiceStore``, through agentstate's services.

Kept apart from ``agentstate.contrib.core`` so that a process outside the site,
which stores through ``RemoteStore``, imports the core without Django's settings
or models; ``agentstate.contrib.core.ServiceStore`` names this class.
"""

from __future__ import annotations

from typing import Any, Unpack

from agentstate.contrib import resumes
from agentstate.contrib.kept import STATE_SCOPE, Call, Question, Review, UsageDelta
from agentstate.exceptions import AlreadyConsumed, RunExists
from agentstate.models import ApprovalRequest
from agentstate.services import approvals, oversight, pauses, runs
from agentstate.services import context as variables

__all__ = ["ServiceStore"]


class ServiceStore:
    """A bridge's storage through agentstate's services (a process of the Django site).

    ``user`` creates the runs and files the requests (``None``: no user)."""

    def __init__(self, user: Any = None) -> None:
        self.user = user

    def create_run(
        self, run_id: str | None, context: Any, existing_ok: bool = False
    ) -> tuple[str, Any]:
        """A new run (``RunExists`` when taken), or with ``existing_ok`` the run of that
        id as it is: ``(run_id, context)``."""
        try:
            run = runs.create_run(run_id=run_id, context=context, user=self.user)
        except RunExists:
            if not existing_ok or run_id is None:
                raise
            run = runs.get_run(run_id)
        return run.run_id, run.context

    def run_context(self, run_id: str) -> Any:
        return runs.get_run(run_id).context

    def request_approval(self, run_id: str, call: Call) -> Review:
        request = approvals.request_approval(run_id, *call, by=self.user)
        return self._review(request)

    def consume(self, run_id: str, review: Review) -> bool:
        """Use the approval of ``review``'s call once, for the arguments it runs with;
        ``False`` when it was used already."""
        try:
            oversight.consume(
                run_id, review.tool_name, review.call_id, review.arguments_to_run, by=self.user
            )
        except AlreadyConsumed:
            return False
        return True

    def reviews(self, run_id: str) -> list[Review]:
        requests = approvals.with_current_status(
            ApprovalRequest.objects.filter(run__run_id=run_id)
        ).order_by("pk")
        return [self._review(request) for request in requests]

    def wait_decided(self, run_id: str, timeout: float) -> list[Review]:
        """The run's reviews once none is pending, or after ``timeout`` seconds, woken by
        each decision (``approvals.wait_run_decided``)."""
        return [self._review(r) for r in approvals.wait_run_decided(run_id, timeout)]

    def add_usage(self, run_id: str, **usage: Unpack[UsageDelta]) -> None:
        runs.add_usage(run_id, **usage)

    def ask(self, run_id: str, interrupt_id: str, owner: str, value: Any) -> Question:
        question_id = pauses.put(run_id, interrupt_id, owner, value, by=self.user)
        return Question(interrupt_id, question_id, value)

    def claim(self, run_id: str, interrupt_id: str, owner: str, question_id: str) -> None:
        pauses.claim(run_id, interrupt_id, owner, question_id, by=self.user)

    def resolve(self, run_id: str, interrupt_id: str) -> None:
        pauses.resolve(run_id, interrupt_id, by=self.user)

    def keep_state(self, run_id: str, saved: str) -> None:
        variables.put(STATE_SCOPE, run_id, saved, by="bridge")

    def peek_state(self, run_id: str) -> str | None:
        kept: str | None = variables.get_state(STATE_SCOPE, run_id)
        return kept

    def take_state(self, run_id: str) -> str | None:
        """Pop the state under a lease, so that a process killed while it resumes leaves
        the run to be resumed again (``agentstate.contrib.resumes``)."""
        return resumes.take(run_id)

    def release_state(self, run_id: str) -> None:
        resumes.release(run_id)

    def put_back_state(self, run_id: str, kept: str) -> None:
        """A resume failed: the state back, with the approvals it consumed."""
        resumes.put_back(run_id)

    @staticmethod
    def _review(request: Any) -> Review:
        return Review(
            request.pk,
            request.tool_name,
            request.call_id,
            request.arguments,
            getattr(request, "current_status", request.status),
            request.always,
            request.reason,
            request.approved_arguments,
        )
