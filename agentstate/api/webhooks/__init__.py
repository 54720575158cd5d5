"""Webhooks and their deliveries."""
