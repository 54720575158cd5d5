from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AgentStateConfig(AppConfig):
    name = "agentstate"
    verbose_name = _("Agent state")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agentstate import checks  # noqa: F401  (registers the system checks)
