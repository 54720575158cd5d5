"""Context variables: named scopes, their JSON values, and list elements."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from agentstate.fields import AnyDepthJSONField, ExactCharField

from .base import KEY_LENGTH


class Scope(models.Model):
    """A named state space (a project directory, a conversation, a tenant).

    Keys are unique per owner; ``owner=None`` is the site's own namespace.
    """

    key = ExactCharField(_("key"), max_length=KEY_LENGTH)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="agentstate_scopes",
        db_index=False,
        verbose_name=_("owner"),
    )
    created_at = models.DateTimeField(_("created at"), db_default=Now())

    class Meta:
        verbose_name = _("scope")
        verbose_name_plural = _("scopes")
        ordering = ["key", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="agentstate_scope_owner_key"),
            models.UniqueConstraint(
                fields=["key"], condition=Q(owner__isnull=True), name="agentstate_scope_site_key"
            ),
        ]

    def __str__(self) -> str:
        return self.key if self.owner_id is None else f"{self.key} ({self.owner})"


class Variable(models.Model):
    """One JSON value of a scope, with a version that grows on every change.

    A list is kept as ``Element`` rows at positions ``head`` .. ``tail - 1`` so
    that push and pop touch one row whatever the list's length; any other
    value is kept in ``value``.
    """

    scope = models.ForeignKey(
        Scope,
        on_delete=models.CASCADE,
        related_name="variables",
        verbose_name=_("scope"),
        db_index=False,
    )
    name = ExactCharField(_("name"), max_length=KEY_LENGTH)
    is_list = models.BooleanField(_("is a list"), default=False)
    value = AnyDepthJSONField(_("value"), null=True, blank=True)
    head = models.BigIntegerField(_("position of the first element"), default=0)
    tail = models.BigIntegerField(_("position after the last element"), default=0)
    version = models.PositiveBigIntegerField(_("version"), default=1)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    updated_by = models.CharField(_("updated by"), max_length=KEY_LENGTH, blank=True)

    class Meta:
        verbose_name = _("variable")
        verbose_name_plural = _("variables")
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "name"], name="agentstate_variable_scope_name"
            ),
            models.CheckConstraint(
                condition=Q(tail__gte=models.F("head")), name="agentstate_variable_bounds"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def length(self) -> int:
        return self.tail - self.head


class Element(models.Model):
    """One element of a list variable, ordered by ``position``."""

    variable = models.ForeignKey(
        Variable, on_delete=models.CASCADE, related_name="elements", db_index=False
    )
    position = models.BigIntegerField()
    value = AnyDepthJSONField(null=True)

    class Meta:
        verbose_name = _("list element")
        verbose_name_plural = _("list elements")
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(
                fields=["variable", "position"], name="agentstate_element_variable_position"
            ),
        ]
