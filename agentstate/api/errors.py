"""Every REST error as ``{"detail", "code"}`` (plus ``"field"`` for bad input, and
what a refusal adds of its own: ``"budget"`` and ``"counter"`` for a budget exceeded).

The views use ``exception_handler`` below whatever the site's
``EXCEPTION_HANDLER`` setting says, so the shape and codes are the app's own.
"""

import logging
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from agentstate.exceptions import AgentStateError

logger = logging.getLogger(__name__)


class BodyTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "body_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"The request body is larger than {limit} bytes.")


def first_error(detail: Any, path: str = "") -> tuple[str, str]:
    """The first (field path, message) of a DRF ValidationError's detail."""
    if isinstance(detail, dict):
        key, value = next(iter(detail.items()))
        field = path if key == "non_field_errors" else (f"{path}.{key}" if path else str(key))
        return first_error(value, field)
    if isinstance(detail, list) and detail:
        return first_error(detail[0], path)
    return path, str(detail)


# An object the path names that is not there (or that the caller may not see).
NOT_FOUND = ("Not found.", "not_found")


def error_body(
    detail: str, code: str, field: str | None = None, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": detail, "code": code}
    if field:
        body["field"] = field
    body.update(extra or {})
    return body


def error_response(
    status_code: int,
    detail: str,
    code: str,
    field: str | None = None,
    headers: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Response:
    return Response(error_body(detail, code, field, extra), status=status_code, headers=headers)


def drop_broken_connections() -> None:
    """Close connections the database dropped, so the next request opens a new one.

    An error inside ``atomic`` closes a broken connection on the way out; in
    autocommit (the single-statement operations) only Django's end-of-request
    cleanup would, and a test client or a caller outside a request never runs
    it. The same check as that cleanup, never inside a transaction.
    """
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close_if_unusable_or_obsolete()


def exception_handler(exc: Exception, context: Mapping[str, Any]) -> Response | None:
    if isinstance(exc, AgentStateError):
        return error_response(exc.status, exc.detail, exc.code, exc.field, extra=exc.extra())
    if isinstance(exc, Http404):
        return error_response(404, *NOT_FOUND)
    if isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, exceptions.ValidationError):
        field, message = first_error(exc.detail)
        detail = f"{field}: {message}" if field else message
        return error_response(400, detail, "invalid", field or None)
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        headers = (
            {"WWW-Authenticate": auth_header}
            if (auth_header := getattr(exc, "auth_header", None))
            else None
        )
        return error_response(401, str(exc.detail), "not_authenticated", headers=headers)
    if isinstance(exc, exceptions.APIException):
        headers = {}
        if wait := getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(wait))
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else str(exc.default_code)
        return error_response(exc.status_code, str(exc.detail), code, headers=headers or None)
    if isinstance(exc, OperationalError | InterfaceError):
        logger.warning("database unavailable: %s", exc)
        drop_broken_connections()
        return error_response(
            503,
            "The database is unavailable; nothing was changed. Retry shortly.",
            "unavailable",
            headers={"Retry-After": "1"},
        )
    if isinstance(exc, DatabaseError):
        logger.exception("database error")
        return error_response(
            503, "The database refused the operation; nothing was changed.", "unavailable"
        )
    return None
