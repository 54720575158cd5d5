"""The Django admin of agentstate, one module per part."""

from agentstate.admin import (
    budgets,  # noqa: F401
    context,  # noqa: F401
    events,  # noqa: F401
    langgraph,  # noqa: F401
    oversight,  # noqa: F401
    pauses,  # noqa: F401
    policies,  # noqa: F401
    runs,  # noqa: F401
    webhooks,  # noqa: F401
)
