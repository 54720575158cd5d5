"""AgentStateSaver passes LangGraph's conformance suite, as published, on this database."""

import pytest
from asgiref.sync import async_to_sync
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import (
    BASE_CAPABILITIES,
    EXTENDED_CAPABILITIES,
)
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from agentstate.contrib.langgraph import AgentStateSaver


@checkpointer_test(name="AgentStateSaver")
async def agentstate_saver():
    yield AgentStateSaver()


@pytest.mark.django_db(transaction=True)
def test_the_conformance_suite_passes_every_capability():
    report = async_to_sync(validate)(agentstate_saver, progress=ProgressCallbacks.verbose())
    results = {name: result.passed for name, result in report.results.items()}
    failures = {name: result.failures for name, result in report.results.items() if result.failures}
    assert failures == {}
    assert results == {cap.value: True for cap in BASE_CAPABILITIES | EXTENDED_CAPABILITIES}
