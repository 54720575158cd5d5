"""Webhooks in the admin: the secret shown once, deliveries with their attempts, send again."""

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agentstate.exceptions import BadInput
from agentstate.models import Delivery, DeliveryAttempt, Webhook
from agentstate.services import webhooks


class WebhookForm(forms.ModelForm):
    """The service's checks as form errors: a refused target or an unknown kind is
    shown on its field, never a server error."""

    class Meta:
        model = Webhook
        fields = ("url", "kinds", "active")
        # A URL typed without a scheme is refused, never given one.
        field_classes = {"url": forms.CharField}

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        try:
            webhooks.check_target(url)
        except BadInput as refused:
            raise forms.ValidationError(refused.detail) from None
        return url

    def clean_kinds(self) -> list[str]:
        try:
            return webhooks.check_kinds(self.cleaned_data["kinds"])
        except BadInput as refused:
            raise forms.ValidationError(refused.detail) from None


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    form = WebhookForm
    list_display = ("url", "kinds", "active", "created_at")
    list_filter = ("active",)
    fields = ("url", "kinds", "active")

    def save_model(self, request: HttpRequest, obj: Webhook, form: ModelForm, change: bool) -> None:
        if change:  # the form checked the URL and the kinds
            super().save_model(request, obj, form, change)
            return
        created = webhooks.create_webhook(obj.url, obj.kinds, obj.active, by=request.user)
        obj.pk, obj.secret = created.pk, created.secret
        self.message_user(
            request,
            _("The webhook's secret, shown this once: %(secret)s") % {"secret": created.secret},
            messages.WARNING,
        )


class AttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    fields = ("at", "status_code", "duration_ms", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Delivery | None = None) -> bool:
        return False


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("pk", "webhook", "event", "status", "attempts", "next_attempt_at")
    list_filter = ("status",)
    list_select_related = ("webhook", "event")
    readonly_fields = ("webhook", "event", "status", "attempts", "next_attempt_at", "delivered_at")
    fields = readonly_fields
    inlines = [AttemptInline]
    actions = ["send_again"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Delivery | None = None) -> bool:
        return False

    def has_send_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("agentstate.change_webhook")

    @admin.action(description=_("Send the selected failed deliveries again"), permissions=["send"])
    def send_again(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        count = webhooks.send_again(queryset)
        self.message_user(
            request,
            ngettext("%d delivery will be sent again.", "%d deliveries will be sent again.", count)
            % count,
        )
