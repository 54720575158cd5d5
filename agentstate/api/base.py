"""The base of every agentstate view: its own parser, renderer, errors,
permissions and schema, so the API behaves the same in any site. Only
authentication comes from the site's DRF settings.
"""

import functools
import io
from collections.abc import Callable
from datetime import UTC, datetime
from typing import IO, Any

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from rest_framework import ISO_8601, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.fields import SkipField
from rest_framework.relations import PKOnlyObject
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import ListField
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from agentstate.conf import agentstate_settings
from agentstate.db import window_page
from agentstate.exceptions import BadInput

from .access import IsAuthenticated
from .errors import exception_handler, first_error
from .negotiation import ContentNegotiation
from .pagination import Fetch, Pagination
from .parsers import BoundedJSONParser
from .schema import AgentStateSchema


def _read_at_most(stream: IO[bytes], size: int) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk = stream.read(min(remaining, 64 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def buffer_unsized_body(request: HttpRequest) -> None:
    """Make a chunked body (no Content-Length) visible to the parser, bounded.

    DRF reads a body without Content-Length as empty, so a chunked request
    would be silently treated as ``{}``. Where the server has the whole body
    at hand (a WSGI server that de-chunked the input, ``wsgi.input_terminated``,
    as gunicorn does; Django's ASGI handler, which reads the body before the
    view runs), read at most ``MAX_BODY_BYTES + 1`` bytes of it and declare
    what was read; the parser then refuses an oversized body with 413 like any
    other.
    """
    meta = request.META
    if meta.get("CONTENT_LENGTH") or getattr(request, "_read_started", False):
        return
    if isinstance(request, ASGIRequest):
        stream = request._stream
    elif meta.get("wsgi.input_terminated") and "wsgi.input" in meta:
        stream = meta["wsgi.input"]
    else:
        return
    raw = _read_at_most(stream, agentstate_settings.MAX_BODY_BYTES + 1)
    request._stream = io.BytesIO(raw)
    meta["CONTENT_LENGTH"] = str(len(raw))


class AgentStateAPIView(APIView):
    parser_classes = [BoundedJSONParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = ContentNegotiation
    permission_classes = [IsAuthenticated]
    throttle_classes: list[type[BaseThrottle]] = []
    # A site's DEFAULT_VERSIONING_CLASS would refuse every request without its version.
    versioning_class = None
    pagination_class = Pagination
    schema = AgentStateSchema()

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        buffer_unsized_body(request)
        return super().initialize_request(request, *args, **kwargs)

    def get_exception_handler(self) -> Callable[..., Response | None]:
        return exception_handler

    def get_authenticate_header(self, request: Request) -> str:
        # Always 401 for a missing or bad credential, even when the site's
        # first authenticator (session auth) offers no challenge.
        return super().get_authenticate_header(request) or 'Session realm="api"'

    def validated(self, serializer_class: type[serializers.Serializer], data: Any) -> Any:
        """``data`` validated by ``serializer_class``: its ``validated_data``, or the
        ValidationError of ``is_valid``."""
        try:
            return _shared(serializer_class).run_validation(data)
        except ValidationError:
            pass
        # Refused: the errors exactly as a serializer of its own words them
        # (``is_valid`` reshapes a few, such as a missing body).
        serializer = serializer_class(data=data, context={"request": self.request, "view": self})
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def query(self, serializer_class: type[serializers.Serializer]) -> Any:
        """Validated query parameters (lists for ``ListField`` entries).

        Any other parameter given more than once is bad input: taking one of
        the values silently could, say, delete another variable than meant.
        """
        params = self.request.query_params
        lists = _list_fields(serializer_class)
        for name in params:
            if len(params.getlist(name)) > 1 and name not in lists:
                raise BadInput(f"{name}: give this query parameter only once.", field=name)
        data = {
            name: params.getlist(name) if name in lists else params.get(name) for name in params
        }
        try:
            return self.validated(serializer_class, data)
        except ValidationError as error:
            # A bad item of a repeated parameter is named by the parameter
            # (``name``), not by its position in the list (``name.1``).
            path, message = first_error(error.detail)
            name = path.split(".")[0]
            if name != path and name in lists:
                raise BadInput(f"{name}: {message}", field=name) from None
            raise

    def paginate(
        self, queryset: QuerySet[Any], serializer_class: type[serializers.Serializer]
    ) -> Response:
        return self.paginate_fetched(
            lambda offset, limit: window_page(queryset, offset, limit), serializer_class
        )

    def paginate_fetched(
        self, fetch: Fetch, serializer_class: type[serializers.Serializer]
    ) -> Response:
        """The page the request asks for, read by ``fetch(offset, limit)``: its rows
        and the listing's total, in one query."""
        paginator = Pagination()
        page = paginator.paginate_fetched(fetch, self.request)
        return paginator.get_paginated_response(represent_rows(serializer_class, page))


def represent(serializer_class: type[serializers.Serializer], instance: Any) -> Any:
    """``serializer_class(instance).data``, read as ``represent_rows`` reads a row."""
    if instance is None:
        return serializer_class(instance).data
    return represent_rows(serializer_class, [instance])[0]


def represent_rows(serializer_class: type[serializers.Serializer], rows: list[Any]) -> list[Any]:
    """``serializer_class(rows, many=True).data``: each row as the serializer's
    ``to_representation`` gives it, field by field, the common fields read
    straight off the row (``_readers``) and the current time zone looked up once."""
    return represent_in(serializer_class, rows, current_zone()) if rows else []


# Zones of offset 0 at every time: a time shown in one of them is shown as in ``UTC``.
_UTC_ZONES = frozenset({"UTC", "Etc/UTC"})


def current_zone() -> Any:
    """The time zone a listing shows its times in: the current one (``None``: without
    ``USE_TZ``), ``UTC`` for any zone always at offset 0 (``UTC`` is what the times
    read from the database carry, so that ``show_time`` needs no conversion)."""
    if not settings.USE_TZ:
        return None
    zone = timezone.get_current_timezone()
    return UTC if getattr(zone, "key", None) in _UTC_ZONES else zone


def represent_in(serializer_class: type[serializers.Serializer], rows: Any, zone: Any) -> list[Any]:
    """``represent_rows`` in the time zone ``zone`` (``None``: without ``USE_TZ``),
    for a field of a row that shows a list of its own (``read_row``)."""
    shown_by = _shared(serializer_class)
    if type(shown_by).to_representation is not serializers.Serializer.to_representation:
        return [shown_by.to_representation(row) for row in rows]  # its own way
    readers = _readers(serializer_class)
    shown: list[Any] = []
    for row in rows:
        item = {}
        for name, read in readers:
            value = read(row, zone)
            if value is not _SKIP:
                item[name] = value
        shown.append(item)
    return shown


_SKIP = object()  # a field the serializer leaves out of a row (``SkipField``)
Reader = Callable[[Any, Any], Any]


@functools.cache
def _readers(serializer_class: type[serializers.Serializer]) -> list[tuple[str, Reader]]:
    """Per readable field of the serializer, in order, what reads it off a row as
    ``Serializer.to_representation`` would: an attribute of the row as DRF's
    ``CharField``, ``IntegerField``, ``UUIDField``, ``JSONField`` or ISO 8601
    ``DateTimeField`` shows it; a related row's slug as ``SlugRelatedField``
    shows it; the method of a ``SerializerMethodField``; any
    other field through its own ``get_attribute`` and ``to_representation``."""
    return [
        (field.field_name, _reader(field)) for field in _shared(serializer_class)._readable_fields
    ]


def _reader(field: Any) -> Reader:
    def read_field(row: Any, zone: Any) -> Any:
        try:
            attribute = field.get_attribute(row)
        except SkipField:
            return _SKIP
        check = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
        return None if check is None else field.to_representation(attribute)

    read_row = getattr(field, "read_row", None)
    if read_row is not None:  # a field that reads a row its own way
        return read_row  # type: ignore[no-any-return]
    kind = type(field)
    if kind is serializers.SerializerMethodField:
        method = getattr(field.parent, field.method_name)
        return lambda row, zone: method(row)
    attrs = field.source_attrs
    if kind is serializers.SlugRelatedField and len(attrs) == 1 and "__" not in field.slug_field:
        return _slug_reader(attrs[0], field.slug_field, read_field)
    convert = _CONVERTERS.get(kind)
    if not attrs or convert is None or not _plain(field):
        return read_field
    if len(attrs) > 1:  # through related rows (``run.run_id``)

        def read_through(row: Any, zone: Any) -> Any:
            value: Any = row
            for name in attrs:
                value = getattr(value, name, _SKIP)
                if value is _SKIP or value is None or callable(value):
                    return read_field(row, zone)  # as DRF has it
            if kind is not serializers.DateTimeField:
                return convert(value)
            return (
                read_field(row, zone)
                if zone is None or isinstance(value, str)
                else show_time(value, zone)
            )

        return read_through
    return _reader_of(field, attrs[0], kind, convert, read_field)


def _reader_of(field: Any, attr: str, kind: type, convert: Any, read_field: Reader) -> Reader:
    """What reads ``attr`` off a row as ``field`` (of class ``kind``) shows it, with
    ``read_field`` for what DRF shows its own way."""
    if kind is serializers.DateTimeField:

        def read_time(row: Any, zone: Any) -> Any:
            value: Any = getattr(row, attr, _SKIP)
            if value is _SKIP or zone is None or isinstance(value, str):
                return read_field(row, zone)  # as DRF has it
            return show_time(value, zone)

        return read_time

    def read(row: Any, zone: Any) -> Any:
        value: Any = getattr(row, attr, _SKIP)
        if value is _SKIP or callable(value):
            return read_field(row, zone)  # a default, a skipped field, a method: as DRF has it
        return None if value is None else convert(value)

    return read


def _slug_reader(attr: str, slug: str, read_field: Reader) -> Reader:
    """What reads a ``SlugRelatedField``: the related object's ``slug``, as it is."""

    def read_slug(row: Any, zone: Any) -> Any:
        related: Any = getattr(row, attr, _SKIP)
        if related is None:
            return None
        value = _SKIP if related is _SKIP else getattr(related, slug, _SKIP)
        return read_field(row, zone) if value is _SKIP else value  # else as DRF has it

    return read_slug


_ISO_FIELD = serializers.DateTimeField()


def show_time(value: Any, zone: Any) -> Any:
    """A time as DRF's ISO 8601 ``DateTimeField`` shows it in the time zone ``zone``
    (the current one, looked up once a page; ``None``: without ``USE_TZ``)."""
    if value is None:
        return None
    if value.tzinfo is zone is UTC and value.__class__ is datetime:
        return value.isoformat()[:-6] + "Z"  # as below: no conversion, "+00:00" as Z
    if zone is None or value.utcoffset() is None:  # naive (``timezone.is_naive``)
        return _ISO_FIELD.to_representation(value)
    text = value.astimezone(zone).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _plain(field: Any) -> bool:
    """Whether ``field`` shows its value as its class does by default (no output
    format, time zone or UUID format of its own, not as binary JSON)."""
    if isinstance(field, serializers.DateTimeField):
        return (
            not hasattr(field, "timezone")
            and getattr(field, "format", api_settings.DATETIME_FORMAT) == ISO_8601
        )
    if isinstance(field, serializers.UUIDField):
        return field.uuid_format == "hex_verbose"
    if isinstance(field, serializers.JSONField):
        return not field.binary
    if isinstance(field, serializers.BigIntegerField):
        return not getattr(field, "coerce_to_string", api_settings.COERCE_BIGINT_TO_STRING)
    return True


def _same(value: Any) -> Any:
    return value


_CONVERTERS: dict[type, Callable[[Any], Any]] = {
    serializers.CharField: str,
    serializers.IntegerField: int,
    serializers.BigIntegerField: int,
    serializers.UUIDField: str,
    serializers.JSONField: _same,
    serializers.DateTimeField: _same,  # read by ``read_time``
}


@functools.cache
def _shared(serializer_class: type[serializers.Serializer]) -> Any:
    """One instance of ``serializer_class`` with its fields built, for every request.

    DRF builds a serializer's fields anew for each instance (deep copies of
    the declared ones, and a model's introspected for a ``ModelSerializer``):
    most of a small request's Python. Validating (``run_validation``) and
    representing (``to_representation``) keep no state on the instance, and
    agentstate's serializers read no context, so one instance serves every
    request and thread.
    """
    serializer = serializer_class()
    serializer.fields  # noqa: B018 (built here, once)
    return serializer


@functools.cache
def _list_fields(serializer_class: type[serializers.Serializer]) -> frozenset[str]:
    """The names of a query serializer's ``ListField`` entries (repeatable parameters)."""
    fields = _shared(serializer_class).fields
    return frozenset(name for name, field in fields.items() if isinstance(field, ListField))
