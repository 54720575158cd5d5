"""Approval rules (oversight): who decides a tool's requests, how many, and by when."""
