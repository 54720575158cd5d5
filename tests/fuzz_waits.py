"""A schemathesis hook for every fuzz run: a ``wait`` the server would honour (a
long-poll of up to ``MAX_WAIT`` seconds) is cut to a tenth of a second before the
request leaves, in every phase (the coverage phase sends the schema's maximum,
as the text ``"60"``), so that no request of the run waits longer than its timeout. A
``wait`` past the maximum goes as generated: it is refused at once."""

from typing import Any

import schemathesis

from agentstate.conf import DEFAULTS

SHORT = 0.1


def short(query: Any) -> None:
    if isinstance(query, dict) and SHORT < seconds(query.get("wait")) <= DEFAULTS["MAX_WAIT"]:
        query["wait"] = SHORT


def seconds(wait: Any) -> float:
    """The seconds a ``wait`` asks for: generated as a number, or as the text the
    coverage phase sends (``"60"``); 0 for anything else."""
    try:
        return float(wait) if isinstance(wait, int | float | str) else 0.0
    except ValueError:
        return 0.0


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: Any) -> None:
    short(case.query)
