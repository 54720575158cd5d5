"""Integrations with agent runtimes; each module imports its runtime only when used."""
