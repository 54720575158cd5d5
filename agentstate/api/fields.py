"""Strict serializer fields: no coercion of one JSON type into another.

DRF's own fields turn ``5`` into ``"5"`` and ``"true"`` into ``True``; an
agent sending the wrong type should hear about it instead.
"""

from typing import Any, ClassVar

from rest_framework import serializers

from agentstate.conf import agentstate_settings
from agentstate.exceptions import BadInput
from agentstate.models import KEY_LENGTH, RUN_ID_LENGTH
from agentstate.validation import check_json, check_run_id, text_problem

from .negotiation import FORMAT_PARAMETER
from .pagination import Pagination

# What the OpenAPI schema states of a string (ECMA-262 and Python read both alike).
# Text holds no U+0000 (an unpaired surrogate is no Unicode text: UTF-8 cannot carry one).
# Not empty: DRF refuses a blank string unless allow_blank, which the schema then adds.
TEXT_PATTERN = r"^[^\u0000]+$"
# check_run_id's rule: 1 to RUN_ID_LENGTH of A-Z a-z 0-9 . _ : -, and not "." or "..".
RUN_ID_PATTERN = rf"^(?!\.\.?$)[A-Za-z0-9._:-]{{1,{RUN_ID_LENGTH}}}$"


class StrictCharField(serializers.CharField):
    """A string kept exactly as sent: no number coerced, no whitespace trimmed.

    ``openapi``: what the schema adds to the field's (``AgentStateSchema``), so
    a request valid by the schema passes the field's own checks.
    """

    openapi: ClassVar[dict[str, Any]] = {"pattern": TEXT_PATTERN}

    def __init__(self, openapi: dict[str, Any] | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        if openapi:
            self.openapi = {**type(self).openapi, **openapi}  # type: ignore[misc]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.", code="invalid")
        problem = text_problem(data)
        if problem:
            raise serializers.ValidationError(f"Must not {problem.removeprefix('must not ')}.")
        return super().to_internal_value(data)


class KeyField(StrictCharField):
    """A scope key, variable name, chat id, call id or tool name: 1 to 255 characters."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", KEY_LENGTH)
        kwargs.setdefault("min_length", 1)
        kwargs.setdefault("trim_whitespace", False)
        kwargs.setdefault("allow_blank", False)
        super().__init__(**kwargs)


class RunIdField(StrictCharField):
    openapi: ClassVar[dict[str, Any]] = {"pattern": RUN_ID_PATTERN}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        try:
            return check_run_id(value)
        except BadInput as error:
            raise serializers.ValidationError(error.detail) from error


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            raise serializers.ValidationError("Must be true or false.", code="invalid")
        return data


class StrictIntegerField(serializers.IntegerField):
    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise serializers.ValidationError("Must be an integer.", code="invalid")
        return super().to_internal_value(data)


class QueryIntegerField(serializers.IntegerField):
    """A query parameter's integer: decimal digits only (no sign, point or space)."""

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, str) or not data.isascii() or not data.isdigit():
            raise serializers.ValidationError("Must be an integer.", code="invalid")
        return super().to_internal_value(data)


class AnyJSONField(serializers.JSONField):
    """Any JSON value, ``null`` included, within the depth limit."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        try:
            return check_json(data, self.field_name or "", agentstate_settings.MAX_JSON_DEPTH)
        except BadInput as error:
            raise serializers.ValidationError(error.detail) from error


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, and anything but an object."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError(
                {"non_field_errors": ["Expected a JSON object."]}, code="invalid"
            )
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({unknown[0]: ["Unknown field."]}, code="invalid")
        return super().to_internal_value(data)


class QuerySerializer(serializers.Serializer):
    """Validates ``request.query_params``; repeated parameters are allowed only for lists.
    Beside its own fields, any query may carry the page's (the pagination checks them)
    and the renderer's format (the content negotiation's)."""

    # Taken by the pagination and the content negotiation, not by the view.
    SHARED = frozenset(
        {Pagination.page_query_param, Pagination.page_size_query_param, FORMAT_PARAMETER}
    )

    def to_internal_value(self, data: Any) -> Any:
        unknown = sorted(set(data) - set(self.fields) - self.SHARED)
        if unknown:
            raise serializers.ValidationError({unknown[0]: ["Unknown query parameter."]})
        return super().to_internal_value(data)
