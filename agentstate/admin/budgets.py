"""Budgets in the admin: on the run's page and on the user's page (docs/admin.md).

Each is an inline whose caps (and, for a user's, period) holders of
``agentstate.change_budget`` edit, with what is used and what remains shown
read-only. Saving goes through ``agentstate.services.budgets`` with the
counters the form changed, like a REST client's PUT, so it records a
``budget.set`` event and never writes the counters ``add_usage`` moves.

The user's inline is added to whatever ModelAdmin the site registered for
its user model on the default admin site (``add_user_budget_inline``, run
when the app is ready and again when the admin builds its URLs, so a site
that replaces ``UserAdmin``, in any order of ``INSTALLED_APPS``, gets it on
its own). ``AGENTSTATE["USER_BUDGET_INLINE"] = False`` leaves the user's page
alone.
"""

from typing import Any, cast

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import Field
from django.forms import BaseInlineFormSet, ModelForm
from django.http import HttpRequest
from django.utils.html import format_html_join
from django.utils.translation import gettext_lazy as _

from agentstate.backends import BudgetState
from agentstate.conf import agentstate_settings
from agentstate.models import Budget
from agentstate.services import budgets

CHANGE_PERM = "agentstate.change_budget"
CAP_FIELDS = tuple(f"max_{name}" for name in Budget.COUNTERS)


def _counters(values: dict[str, int | None], none: str) -> str:
    return format_html_join(
        "",
        "<div>{}: {}</div>",
        (
            (
                cast(Field, Budget._meta.get_field(f"max_{name}")).verbose_name,
                none if value is None else value,
            )
            for name, value in values.items()
        ),
    )


class BudgetFormSet(BaseInlineFormSet):
    """Saves through the service: the caps (and period) a form changed, as one operation."""

    request: HttpRequest  # set by ``BudgetInline.get_formset``

    def save(self, commit: bool = True) -> list[Budget]:
        self.new_objects: list[Budget] = []
        self.changed_objects: list[tuple[Budget, list[str]]] = []
        self.deleted_objects: list[Budget] = []
        for form in self.forms:
            if not form.has_changed():
                continue
            changed = [name for name in form.changed_data if name in form.cleaned_data]
            state = self.write(form, changed)
            saved = state.budget
            assert saved is not None  # just set
            if form.instance.pk is None:
                self.new_objects.append(saved)
            else:
                self.changed_objects.append((saved, changed))
            form.instance = saved
        return [*self.new_objects, *(budget for budget, _ in self.changed_objects)]

    @staticmethod
    def caps(form: ModelForm, changed: list[str]) -> dict[str, int | None]:
        return {
            name: form.cleaned_data[f"max_{name}"]
            for name in Budget.COUNTERS
            if f"max_{name}" in changed
        }

    def write(self, form: ModelForm, changed: list[str]) -> BudgetState:
        raise NotImplementedError


class RunBudgetFormSet(BudgetFormSet):
    def write(self, form: ModelForm, changed: list[str]) -> BudgetState:
        return budgets.set_run_budget(self.instance, self.caps(form, changed), by=self.request.user)


class UserBudgetFormSet(BudgetFormSet):
    def write(self, form: ModelForm, changed: list[str]) -> BudgetState:
        period = (form.cleaned_data["period"] or None) if "period" in changed else budgets.KEEP
        return budgets.set_user_budget(
            self.instance, self.caps(form, changed), period=period, by=self.request.user
        )


class BudgetInline(admin.StackedInline):
    model = Budget
    extra = 1
    max_num = 1
    can_delete = False

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        # the formset's class is made for this request: it may carry it
        return type(formset.__name__, (formset,), {"request": request})

    def read(self, budget: Budget) -> BudgetState | None:
        """The budget as it stands; ``None`` for the blank form of a new one."""
        raise NotImplementedError

    def state(self, budget: Budget) -> BudgetState | None:
        """``read``, once per page."""
        if not hasattr(budget, "_agentstate_state"):
            budget._agentstate_state = self.read(budget)  # type: ignore[attr-defined]
        state: BudgetState | None = budget._agentstate_state  # type: ignore[attr-defined]
        return state

    @admin.display(description=_("used"))
    def used(self, budget: Budget) -> str:
        state = self.state(budget)
        return "—" if state is None else _counters(dict(state.used), "0")

    @admin.display(description=_("remaining"))
    def remaining(self, budget: Budget) -> str:
        state = self.state(budget)
        return "—" if state is None else _counters(state.remaining, str(_("no cap")))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True  # whoever sees the page it is on

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(CHANGE_PERM)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(CHANGE_PERM)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class RunBudgetInline(BudgetInline):
    """The run's budget: its caps; ``used`` is the run's usage."""

    fk_name = "run"
    formset = RunBudgetFormSet
    fields = (CAP_FIELDS, "used", "remaining")
    readonly_fields = ("used", "remaining")

    def read(self, budget: Budget) -> BudgetState | None:
        run = budget.run  # no query for a blank form's
        return None if run is None else budgets.run_budget(run)


class UserBudgetInline(BudgetInline):
    """The user's budget over every run the user created."""

    fk_name = "user"
    formset = UserBudgetFormSet
    fields = ("period", CAP_FIELDS, "used", "remaining", "resets_at")
    readonly_fields = ("used", "remaining", "resets_at")
    verbose_name = _("agent usage budget")

    def read(self, budget: Budget) -> BudgetState | None:
        user = budget.user
        return None if user is None else budgets.user_budget(user)

    @admin.display(description=_("resets at"))
    def resets_at(self, budget: Budget) -> Any:
        state = self.state(budget)
        return "—" if state is None or state.resets_at is None else state.resets_at


def add_user_budget_inline(site: admin.AdminSite = admin.site) -> bool:
    """Add ``UserBudgetInline`` to the ModelAdmin ``site`` has for the user model, once;
    whether it is there (not when no user admin is registered, or the
    ``USER_BUDGET_INLINE`` setting is false)."""
    user_model = get_user_model()
    if not agentstate_settings.USER_BUDGET_INLINE or not site.is_registered(user_model):
        return False
    model_admin = site.get_model_admin(user_model)
    if UserBudgetInline not in model_admin.inlines:
        # the instance's own inlines: the class (and other sites using it) stay as they are
        model_admin.inlines = (*model_admin.inlines, UserBudgetInline)  # type: ignore[misc]
    return True


def _add_when_urls_are_built(site: admin.AdminSite) -> None:
    """Add the user's inline when ``site`` builds its URLs (the site's URLconf loads
    after every app is ready, whatever the order of ``INSTALLED_APPS``)."""
    original = site.get_urls

    def get_urls() -> list[Any]:
        add_user_budget_inline(site)
        return original()

    site.get_urls = get_urls  # type: ignore[method-assign]


_add_when_urls_are_built(admin.site)
