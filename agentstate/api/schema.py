"""OpenAPI generation for agentstate's views, independent of site settings.

``documented()`` is ``extend_schema`` bound to ``AgentStateSchema`` (not the
site's ``DEFAULT_SCHEMA_CLASS``), and every operation documents the error
shape ``{"detail", "code", "field"?}`` for the statuses it can answer.
"""

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import build_parameter_type
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers

from .fields import StrictSerializer
from .negotiation import FORMAT_PARAMETER

F = TypeVar("F", bound=Callable[..., Any])


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    code = serializers.CharField()
    field = serializers.CharField(required=False)


# The query parameters of every paginated listing.
PAGES = [
    OpenApiParameter("page", {"type": "integer", "minimum": 1}),
    OpenApiParameter(
        "page_size",
        {"type": "integer", "minimum": 1},
        description="Items a page (above AGENTSTATE['MAX_PAGE_SIZE']: that many).",
    ),
]
# What ``?wait=`` takes, as far as a schema can say (the maximum is MAX_WAIT's default).
WAIT_SCHEMA = {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 60}
WAIT = OpenApiParameter(
    "wait",
    WAIT_SCHEMA,
    description="Seconds to wait for a change (above 0, at most AGENTSTATE['MAX_WAIT']).",
)

COMMON_ERRORS = (400, 401, 403, 404, 405, 406, 409, 410, 412, 413, 415, 503)


class AgentStateSchema(AutoSchema):
    """States what the fields check beyond DRF's own mapping: a field's ``openapi``
    (patterns, enums), and ``additionalProperties: false`` on a body that refuses
    unknown fields (``StrictSerializer``)."""

    def _map_serializer_field(
        self, field: serializers.Field, direction: str, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer_field(  # type: ignore[no-untyped-call]
            field, direction, bypass_extensions
        )
        schema.update(getattr(field, "openapi", {}))
        return schema

    def _map_basic_serializer(
        self, serializer: serializers.Serializer, direction: str
    ) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)  # type: ignore[no-untyped-call]
        if isinstance(serializer, StrictSerializer):
            schema["additionalProperties"] = False
        return schema

    def _get_format_parameters(self) -> list[dict[str, Any]]:
        # The views' own format parameter (``ContentNegotiation``), not the site's.
        formats = self.map_renderers("format")
        if len(formats) < 2:
            return []
        return [
            build_parameter_type(
                name=FORMAT_PARAMETER,
                schema={"type": "string"},
                location=OpenApiParameter.QUERY,
                enum=formats,
            )
        ]

    def _get_response_bodies(
        self, direction: Literal["request", "response"] = "response"
    ) -> dict[str, Any]:
        bodies = super()._get_response_bodies(direction)
        for code in COMMON_ERRORS:
            response = self._get_response_for_code(ErrorSerializer, str(code))  # type: ignore[no-untyped-call]
            bodies.setdefault(str(code), response)
        return bodies


def documented(**kwargs: Any) -> Callable[[F], F]:
    """``@extend_schema(**kwargs)`` on an agentstate view method."""

    def decorator(method: F) -> F:
        method.schema = AgentStateSchema  # type: ignore[attr-defined]
        return extend_schema(**kwargs)(method)

    return decorator
