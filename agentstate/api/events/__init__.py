"""The audit trail: ``/api/events/``."""
