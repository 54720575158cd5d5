"""The Django admin of agentstate, one module per part."""

from agentstate.admin import (
    context,  # noqa: F401
    events,  # noqa: F401
    langgraph,  # noqa: F401
    pauses,  # noqa: F401
    runs,  # noqa: F401
    webhooks,  # noqa: F401
)
