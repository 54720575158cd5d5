"""Paused runs: ``/api/pauses/`` and its claim, resolve and cancel."""
