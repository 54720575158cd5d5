"""placeholder"""

from langgraph.store.base import BaseStore


class AgentStateStore(BaseStore):
    pass
