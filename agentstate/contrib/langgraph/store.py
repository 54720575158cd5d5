"""``AgentStateStore``: LangGraph's long-term memory store on context variables.

A namespace is a scope of the site's own namespace (no owner), keyed
``langgraph:`` and the namespace's labels joined by ``.`` (a label holds no
``.``, so the key names one namespace); a key is a variable of it, holding
``{"value", "created_at", "updated_at"}`` and, with a TTL, ``"ttl"`` (minutes)
and ``"expires_at"`` (epoch seconds), all three times by the database's clock,
so that nodes whose clocks drift apart agree on what expired. A get (each run
of consecutive gets of a batch) and a put are one operation of the database's
backend each (``store_get``, ``store_put``: one round trip on PostgreSQL); a
search and ``list_namespaces`` read the database's clock, then are one query
each (a search that refreshes TTLs adds one ``store_get``).

Every read checks expiry itself, so an expired item is never returned, nor
its namespace listed, whether or not the sweep (``agentstate.services.sweep``,
which the Celery task and ``manage.py agentstate_expire`` run) deleted it yet.
A read refreshes the TTL of what it returns when asked to (the TTL config's
``refresh_on_read``, by default), in the same backend operation as the read; a
refresh that meets a write in progress waits for it and applies to it (the
written value stands). No semantic index: a search's ``query`` is ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.db import DEFAULT_DB_ALIAS
from django.db.models import Q, QuerySet
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from agentstate.backends import Backend, backend
from agentstate.db import database_epoch
from agentstate.exceptions import NotFound
from agentstate.models import Variable
from agentstate.services.sweep import purge_store_items
from agentstate.types import STORE_PREFIX
from agentstate.validation import check_key

PREFIX = STORE_PREFIX
ACTOR = "langgraph"


def scope_key(namespace: tuple[str, ...]) -> str:
    return PREFIX + ".".join(namespace)


def namespace_of(key: str) -> tuple[str, ...]:
    return tuple(key[len(PREFIX) :].split("."))


def _compare(value: Any, wanted: Any) -> bool:
    """A filter's match, the way LangGraph's stores compare (``$eq``, ``$ne``,
    ``$gt``, ``$gte``, ``$lt``, ``$lte``, nested objects)."""
    if isinstance(wanted, dict):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_compare(v, w) for v, w in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _apply(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if value is None:
        return False
    compare = {
        "$gt": float.__gt__,
        "$gte": float.__ge__,
        "$lt": float.__lt__,
        "$lte": float.__le__,
    }.get(operator)
    if compare is None:
        raise ValueError(f"Unsupported operator: {operator}")
    return bool(compare(float(value), float(operand)))


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(p == "*" or n == p for n, p in pairs)


class AgentStateStore(BaseStore):
    """A LangGraph ``BaseStore`` on the context variables of the database ``using``
    (default: Django's default database). ``ttl``: LangGraph's ``TTLConfig``
    (``default_ttl`` in minutes, ``refresh_on_read``)."""

    supports_ttl = True

    def __init__(self, *, using: str | None = None, ttl: TTLConfig | None = None) -> None:
        self.using = using or DEFAULT_DB_ALIAS
        self.ttl_config = ttl

    @property
    def backend(self) -> Backend:
        return backend(self.using)

    def _live(self) -> QuerySet[Variable]:
        """The store's variables that have not expired now, by the database's clock."""
        now = database_epoch(self.using)
        return (
            Variable.objects.using(self.using)
            .filter(scope__owner__isnull=True, scope__key__startswith=PREFIX)
            .filter(Q(value__expires_at__isnull=True) | Q(value__expires_at__gt=now))
        )

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The operations in order; each run of consecutive gets is one backend call."""
        results: list[Result] = []
        gets: list[GetOp] = []
        for op in ops:
            if isinstance(op, GetOp):
                gets.append(op)
                continue
            if gets:
                results.extend(self._get(gets))
                gets = []
            if isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise ValueError(f"Unknown operation: {op!r}")
        if gets:
            results.extend(self._get(gets))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await sync_to_async(self.batch)(list(ops))

    def _item(
        self,
        key: str,
        namespace: tuple[str, ...],
        stored: dict[str, Any],
        cls: type[Item] = Item,
    ) -> Any:
        return cls(
            value=stored["value"],
            key=key,
            namespace=namespace,
            created_at=datetime.fromisoformat(stored["created_at"]),
            updated_at=datetime.fromisoformat(stored["updated_at"]),
        )

    def _get(self, ops: list[GetOp]) -> list[Item | None]:
        """The items of ``ops``, live ones only, their TTL refreshed where asked: one
        backend call for all."""
        found = self.backend.store_get(
            [(scope_key(op.namespace), op.key, bool(op.refresh_ttl)) for op in ops], ACTOR
        )
        return [
            None if stored is None else self._item(op.key, tuple(op.namespace), stored)
            for op, stored in zip(ops, found, strict=True)
        ]

    def _put(self, op: PutOp) -> None:
        scope = scope_key(op.namespace)
        check_key(scope, "namespace")
        check_key(op.key, "key")
        if op.value is None:
            try:
                self.backend.delete(scope, op.key, None)
            except NotFound:
                pass
            return
        # its times (and with a TTL, its expiry) are the backend's to write
        stored: dict[str, Any] = {"value": op.value}
        if op.ttl is not None:
            stored["ttl"] = op.ttl
        self.backend.store_put(scope, op.key, stored, ACTOR)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        rows = self._live()
        if op.namespace_prefix:
            prefix = scope_key(op.namespace_prefix)
            rows = rows.filter(Q(scope__key=prefix) | Q(scope__key__startswith=prefix + "."))
        found: list[SearchItem] = []
        refresh: list[tuple[str, str, bool]] = []
        skip = op.offset
        ordered = rows.order_by("-updated_at", "scope__key", "name").values_list(
            "scope__key", "name", "value"
        )
        for scope, name, value in ordered.iterator(chunk_size=500):
            stored = cast(dict[str, Any], value)
            if op.filter and not all(
                _compare(stored["value"].get(k), v) for k, v in op.filter.items()
            ):
                continue
            if skip > 0:
                skip -= 1
                continue
            if op.refresh_ttl and stored.get("ttl"):
                refresh.append((scope, name, True))
            found.append(self._item(name, namespace_of(scope), stored, SearchItem))
            if len(found) >= op.limit:
                break
        if refresh:
            self.backend.store_get(refresh, ACTOR)
        return found

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        keys = self._live().order_by().values_list("scope__key", flat=True).distinct()
        namespaces = {namespace_of(key) for key in keys}
        for condition in op.match_conditions or ():
            namespaces = {ns for ns in namespaces if _matches(condition, ns)}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    def sweep_ttl(self, batch_size: int = 1000) -> int:
        """Delete the expired items, ``batch_size`` at a time; how many. The sweep
        (``agentstate.services.sweep.sweep``) does it too, on the default database;
        this is its step for the store's database alone."""
        return purge_store_items(self.backend, batch_size)

    async def asweep_ttl(self, batch_size: int = 1000) -> int:
        return await sync_to_async(self.sweep_ttl)(batch_size)
