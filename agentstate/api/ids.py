"""The one reading of a numeric id in a URL path: the primary keys of approval
requests, approval policies and webhooks (``BigAutoField``).

A path segment names an id when it is ASCII decimal digits whose value a
64-bit key can hold (0 to 2**63 - 1). Anything else (a sign, a point, a
space, a larger number) names no object: the view answers its 404, exactly
as for a missing one, and the database is never asked.
"""

MAX_ID = 2**63 - 1  # The largest value of a BigAutoField on every database


def path_id(text: str) -> int | None:
    """The id ``text`` names, or None when it names none."""
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    # A length check first: int() of thousands of digits is slow (and refused).
    if len(digits) > len(str(MAX_ID)) or int(digits) > MAX_ID:
        return None
    return int(digits)
