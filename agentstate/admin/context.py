"""Scopes and their variables, read in the admin."""
