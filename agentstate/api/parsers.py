"""The only request parser agentstate's views accept: bounded JSON.

The body is refused before it is decoded when it is larger than
``MAX_BODY_BYTES`` (413), and after decoding when it is nested deeper than
``MAX_JSON_DEPTH`` or holds what no JSON column can store (400, naming the
field when the problem is inside the body's outer value).
"""

import json
from collections.abc import Mapping
from typing import IO, Any, NoReturn

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from agentstate.conf import agentstate_settings
from agentstate.exceptions import BadInput
from agentstate.validation import json_problem_at

from .errors import BodyTooLarge


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


class BoundedJSONParser(BaseParser):
    media_type = "application/json"

    def parse(
        self,
        stream: IO[bytes] | None,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = agentstate_settings.MAX_BODY_BYTES
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if declared and declared.isdigit() and int(declared) > limit:
            raise BodyTooLarge(limit)
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise BodyTooLarge(limit)
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except RecursionError:
            raise ParseError("The request body is nested too deeply to decode.") from None
        except (UnicodeDecodeError, ValueError) as error:
            raise ParseError(f"JSON parse error: {error}") from error
        found = json_problem_at(data, agentstate_settings.MAX_JSON_DEPTH)
        if found:
            path, problem = found
            if path:
                raise BadInput(f"{path}: {problem}.", field=path)
            raise ParseError(f"The request body {problem}.")
        return data
