"""schemathesis hooks of the positive-data run (tests/faults/test_fuzz.py).

An ``owner`` names a user of the site, which no schema can state: every
generated owner is the fuzzing user itself, so a request is refused for what
it says, never because the owner it names does not exist. A webhook's URL
names a public address, and the webhook is inactive (see ``_public``).
"""

import re
from typing import Any

import schemathesis

from tests import fuzz_waits  # noqa: F401  (its hook cuts the waits of this run too)

OWNER = "fuzzer"


@schemathesis.hook
def map_query(context: Any, query: Any) -> Any:
    if isinstance(query, dict) and "owner" in query:
        query["owner"] = OWNER
    return query


@schemathesis.hook
def map_body(context: Any, body: Any) -> Any:
    if isinstance(body, dict) and "owner" in body:
        body["owner"] = OWNER
    if isinstance(body, dict) and isinstance(body.get("url"), str):
        body["url"] = _public(body["url"])
        body["active"] = False  # never delivered to
    return body


def _public(url: str) -> str:
    """The generated URL with its host replaced by a public address: whether a
    host resolves, and to what, is the network's answer, not the schema's."""
    return re.sub(r"^([A-Za-z]+://)[^/?#:]+", r"\g<1>1.1.1.1", url)
