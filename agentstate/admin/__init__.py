"""The Django admin of agentstate, one module per part."""

from agentstate.admin import context  # noqa: F401
from agentstate.admin import events  # noqa: F401
from agentstate.admin import pauses  # noqa: F401
from agentstate.admin import runs  # noqa: F401
