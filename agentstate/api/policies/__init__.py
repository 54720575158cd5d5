"""Approval policies and budgets (a run's and a user's)."""
