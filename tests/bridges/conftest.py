import pytest

from agentstate.backends.orm.store import number
from agentstate.models import Variable
from agentstate.types import STORE_PREFIX


class StoreClock:
    """The LangGraph store's items as seen later. Their expiry is by the database's
    clock, which a test cannot move: each stored item's ``expires_at`` is moved back
    instead, as the clock moving on would leave it."""

    def advance(self, seconds: float) -> None:
        items = Variable.objects.filter(
            scope__owner__isnull=True, scope__key__startswith=STORE_PREFIX
        )
        for pk, value in items.values_list("pk", "value"):
            expires = value.get("expires_at") if isinstance(value, dict) else None
            if number(expires):
                Variable.objects.filter(pk=pk).update(
                    value={**value, "expires_at": expires - seconds}
                )


@pytest.fixture
def store_clock():
    return StoreClock()
