"""Context variables and scopes: ``/api/context/...`` and ``/api/scopes/``."""
