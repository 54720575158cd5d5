from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _

from agentstate.extras import MissingExtra


class AgentStateConfig(AppConfig):
    name = "agentstate"
    verbose_name = _("Agent state")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.apps import apps

        from agentstate import checks  # noqa: F401  (registers the system checks)

        try:
            # here, not at the top: the tasks import the models, loaded only now
            from agentstate import tasks
        except MissingExtra:
            pass  # no Celery: agentstate_expire sends the deliveries; runs wait for resume()
        else:
            tasks.connect()

        if apps.is_installed("django.contrib.admin"):
            # Again now that every app's admin module is loaded: a site that
            # registered its own user admin after agentstate's module gets it too.
            from agentstate.admin.budgets import add_user_budget_inline

            add_user_budget_inline()
