"""What the bridges' tests share: a reviewer deciding in a thread of its own."""

import threading

from django.db import connections

from agentstate.models import ApprovalRequest
from agentstate.services import approvals


def review_in_thread(request_id: int, decision: str, user, **options) -> None:
    """A reviewer deciding through the service layer, in its own thread and connection."""
    errors: list[BaseException] = []

    def work() -> None:
        try:
            request = ApprovalRequest.objects.get(pk=request_id)
            approvals.decide(request, decision, by=user, **options)
        except BaseException as error:  # noqa: BLE001 - reported to the test
            errors.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    assert not thread.is_alive() and not errors, errors
