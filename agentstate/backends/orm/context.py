"""Context variables on the ORM: a transaction per operation, the variable's row locked."""

from typing import Any, cast

from django.db import connections
from django.db.models.functions import Now

from agentstate.exceptions import (
    ScopeNotFound,
    TypeConflict,
    UnknownOwner,
    VariableNotFound,
    VersionMismatch,
)
from agentstate.models import Element, Scope, Variable
from agentstate.types import Owner

from .operations import Operations


def json_type(value: Any) -> str:
    """A JSON value's type by ``jsonb_typeof``'s names."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {dict: "object", list: "array", str: "string"}
    return names.get(type(value), type(value).__name__)


class ContextOperations(Operations):
    def _owner_id(self, owner: Owner) -> int | None:
        """The owner's id; a username is looked up (``UnknownOwner`` when no user has it)."""
        if not isinstance(owner, str):
            return owner
        found = self.user_pk(owner)
        if found is None:
            raise UnknownOwner.of(username=owner)
        return found

    def _scope(self, key: str, owner_id: int | None, *, lock: bool = False) -> Scope | None:
        scopes = self.rows(Scope)
        if lock:
            # Held while a variable is added, so the scope cannot be deleted meanwhile.
            scopes = self.lock_no_key(scopes)
        return scopes.filter(key=key, owner_id=owner_id).first()

    def _existing_scope(self, key: str, owner_id: int | None) -> Scope:
        scope = self._scope(key, owner_id)
        if scope is None:
            raise ScopeNotFound.of(scope=key)
        return scope

    def _ensure_scope(self, key: str, owner_id: int | None) -> Scope:
        scope = self._scope(key, owner_id, lock=True)
        while scope is None:
            self.rows(Scope).bulk_create([Scope(key=key, owner_id=owner_id)], ignore_conflicts=True)
            scope = self._scope(key, owner_id, lock=True)
        return scope

    def _locked(self, scope: Scope, name: str) -> Variable | None:
        return self.rows(Variable).select_for_update().filter(scope=scope, name=name).first()

    def _lock_or_create(self, scope_key: str, owner_id: int | None, name: str) -> Variable:
        """The variable's row, locked; a new one is made at version 0 (every caller
        changes it before it commits). The upsert leaves the row locked by this
        transaction whether it inserted it or met a racing creator's."""
        features = connections[self.alias].features
        if features.has_select_for_update and not features.has_select_for_no_key_update:
            # The scope's lock is exclusive here (MySQL, MariaDB): taken before the
            # variable's, in the order every writer takes them. A variable's lock
            # first would be held on a row a pop just deleted (InnoDB keeps it)
            # while this transaction waits for the scope that a creator holds,
            # who waits for that row: a deadlock at every emptied list.
            scope: Scope | None = self._ensure_scope(scope_key, owner_id)
        else:
            scope = self._scope(scope_key, owner_id)
        variable = None if scope is None else self._locked(scope, name)
        if variable is None:
            scope = self._ensure_scope(scope_key, owner_id)
            self.upsert(
                Variable, [Variable(scope=scope, name=name, version=0)], ["scope", "name"], ["name"]
            )
            # The upsert made the row or met a racing creator's: it is there, and locked.
            variable = cast(Variable, self._locked(scope, name))
        return variable

    def _save(self, variable: Variable, actor: str) -> None:
        variable.version += 1
        variable.updated_by = actor
        # updated_at by the database's clock, as on PostgreSQL (save() would set the
        # process's: a resume compares it with a decision's time, ``contrib.resumes``)
        self.rows(Variable).filter(pk=variable.pk).update(
            is_list=variable.is_list,
            value=variable.value,
            head=variable.head,
            tail=variable.tail,
            version=variable.version,
            updated_by=actor,
            updated_at=Now(),
        )

    def _store_list(self, variable: Variable, values: list[Any], start: int = 0) -> None:
        self.rows(Element).bulk_create(
            Element(variable=variable, position=start + i, value=item)
            for i, item in enumerate(values)
        )

    def put(
        self,
        scope: str,
        name: str,
        value: Any,
        if_version: int | None,
        owner: Owner,
        actor: str,
    ) -> int:
        return self.atomic(self._put, scope, name, value, if_version, owner, actor)

    def _put(
        self,
        scope: str,
        name: str,
        value: Any,
        if_version: int | None,
        owner: Owner,
        actor: str,
    ) -> int:
        owner_id = self._owner_id(owner)
        variable = self._lock_or_create(scope, owner_id, name)
        if if_version is not None and variable.version != if_version:
            raise VersionMismatch.of(name=name, version=variable.version, if_version=if_version)
        if variable.is_list:
            self.rows(Element).filter(variable=variable).delete()
        variable.is_list = isinstance(value, list)
        if variable.is_list:
            self._store_list(variable, value)
            variable.value, variable.head, variable.tail = None, 0, len(value)
        else:
            variable.value, variable.head, variable.tail = value, 0, 0
        self._save(variable, actor)
        return variable.version

    def get(self, scope: str, names: list[str] | None, owner: Owner) -> dict[str, Any]:
        return self.atomic(self._get, scope, names, owner)

    def _get(self, scope: str, names: list[str] | None, owner: Owner) -> dict[str, Any]:
        owner_id = self._owner_id(owner)
        variables = self.rows(Variable).filter(scope=self._existing_scope(scope, owner_id))
        if names is not None:
            variables = variables.filter(name__in=names)
        found = list(variables.order_by("name"))
        lists: dict[int, list[Any]] = {v.pk: [] for v in found if v.is_list}
        elements = (
            self.rows(Element)
            .filter(variable_id__in=lists)
            .order_by("variable_id", "position")
            .values_list("variable_id", "value")
        )
        for variable_id, value in elements if lists else ():
            lists[variable_id].append(value)
        return {v.name: lists[v.pk] if v.is_list else v.value for v in found}

    def push(self, scope: str, name: str, value: Any, owner: Owner, actor: str) -> tuple[int, int]:
        return self.atomic(self._extend, scope, name, [value], owner, actor, "push")

    def extend(
        self, scope: str, name: str, values: list[Any], owner: Owner, actor: str
    ) -> tuple[int, int]:
        return self.atomic(self._extend, scope, name, values, owner, actor, "extend")

    def _extend(
        self, scope: str, name: str, values: list[Any], owner: Owner, actor: str, operation: str
    ) -> tuple[int, int]:
        owner_id = self._owner_id(owner)
        variable = self._lock_or_create(scope, owner_id, name)
        if variable.version == 0:  # new: becomes the values
            variable.is_list = True
        elif not variable.is_list:
            if not isinstance(variable.value, str):
                raise TypeConflict.of(
                    name=name, held=json_type(variable.value), operation=operation
                )
            self._store_list(variable, [variable.value])  # a string s becomes [s, *values]
            variable.is_list, variable.value, variable.head, variable.tail = True, None, 0, 1
        self._store_list(variable, values, variable.tail)
        variable.tail += len(values)
        self._save(variable, actor)
        return variable.length, variable.version

    def get_list(
        self, scope: str, name: str, last: int | None, owner: Owner
    ) -> tuple[list[Any], int]:
        return self.atomic(self._get_list, scope, name, last, owner)

    def _get_list(
        self, scope: str, name: str, last: int | None, owner: Owner
    ) -> tuple[list[Any], int]:
        owner_id = self._owner_id(owner)
        variable = (
            self.rows(Variable)
            .filter(scope=self._existing_scope(scope, owner_id), name=name)
            .first()
        )
        if variable is None:
            raise VariableNotFound.of(name=name, scope=scope)
        if not variable.is_list:
            if not isinstance(variable.value, str):
                raise TypeConflict.of(
                    name=name, held=json_type(variable.value), operation="get_list"
                )
            return [variable.value], 1
        # The index (variable, position) read from the tail: O(last), whatever the length.
        low = variable.head if last is None else max(variable.head, variable.tail - last)
        values = (
            self.rows(Element)
            .filter(variable=variable, position__gte=low, position__lt=variable.tail)
            .order_by("position")
            .values_list("value", flat=True)
        )
        return list(values), variable.length

    def pop(self, scope: str, name: str, lifo: bool, owner: Owner, actor: str) -> Any:
        return self.atomic(self._pop, scope, name, lifo, owner, actor)

    def _pop(self, scope: str, name: str, lifo: bool, owner: Owner, actor: str) -> Any:
        owner_id = self._owner_id(owner)
        variable = self._locked(self._existing_scope(scope, owner_id), name)
        if variable is None:
            raise VariableNotFound.of(name=name, scope=scope)
        if not variable.is_list:
            if not isinstance(variable.value, str):
                raise TypeConflict.of(name=name, held=json_type(variable.value), operation="pop")
            variable.delete(using=self.alias)
            return variable.value
        if variable.length == 0:
            raise TypeConflict.of(name=name, held="empty array", operation="pop")
        elements = self.rows(Element).filter(variable=variable)
        position = variable.tail - 1 if lifo else variable.head
        element = elements.get(position=position)
        element.delete(using=self.alias)
        if lifo:
            variable.tail -= 1
        else:
            variable.head += 1
        if variable.length == 0:  # emptied: the variable goes
            variable.delete(using=self.alias)
            return element.value
        if variable.length == 1:  # one string left: the list collapses to it
            rest = elements.get(position=variable.head)
            if isinstance(rest.value, str):
                rest.delete(using=self.alias)
                variable.is_list, variable.value, variable.head, variable.tail = (
                    False,
                    rest.value,
                    0,
                    0,
                )
        self._save(variable, actor)
        return element.value

    def delete(self, scope: str, name: str, owner: Owner) -> None:
        self.atomic(self._delete, scope, name, owner)

    def _delete(self, scope: str, name: str, owner: Owner) -> None:
        owner_id = self._owner_id(owner)
        variable = self._locked(self._existing_scope(scope, owner_id), name)
        if variable is None:
            raise VariableNotFound.of(name=name, scope=scope)
        variable.delete(using=self.alias)

    def delete_scope(self, scope: str, owner: Owner) -> None:
        self.atomic(self._delete_scope, scope, owner)

    def _delete_scope(self, scope: str, owner: Owner) -> None:
        owner_id = self._owner_id(owner)
        found = self.rows(Scope).select_for_update().filter(key=scope, owner_id=owner_id).first()
        if found is None:
            raise ScopeNotFound.of(scope=scope)
        list(self.rows(Variable).select_for_update().filter(scope=found).values_list("pk"))
        found.delete(using=self.alias)
