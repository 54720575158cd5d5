"""The REST API's tokens on the ORM: DRF's own lookup."""

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Model


class AuthOperations:
    def token(self, token_model: type[Model], key: str) -> Any:
        # as DRF's TokenAuthentication reads it (the site's routers decide the database)
        try:
            return token_model._default_manager.select_related("user").get(key=key)
        except ObjectDoesNotExist:  # the token model's DoesNotExist
            return None
