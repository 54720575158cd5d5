"""Runs, their usage and approvals, and the approval requests' review queue."""
