"""Messages for people, bounded: lists and texts cut to a budget, saying what was left out.

Pure (no I/O, no clock), so the controllers' pure decisions can use it: conditions,
Events and status fields built from inputs of any size (a member's error, a list of
clusters) stay within what the API server and etcd accept, and readable.
"""

from collections.abc import Iterable

MAX_CONDITION_MESSAGE = 32768
"""Characters the API server accepts in a condition ``message`` (metav1.Condition)."""

MESSAGE_BUDGET = 1024
"""Characters a list of names may take in a message meant for people (see :func:`join_limited`)."""

ELLIPSIS = "\u2026"


def join_limited(items: Iterable[str], budget: int = MESSAGE_BUDGET, separator: str = ", ") -> str:
    """Join ``items`` within ``budget`` characters: ``a, b, c … and 2997 more``.

    All items when they fit; otherwise as many as fit, in order, followed by
    how many were left out.  The result is at most ``budget`` characters long
    (unless ``budget`` is too small even for the count).
    """
    names = list(items)
    whole = separator.join(names)
    if len(whole) <= budget:
        return whole
    reserve = len(f" {ELLIPSIS} and {len(names)} more")
    shown: list[str] = []
    length = 0
    for name in names:
        add = len(name) + (len(separator) if shown else 0)
        if length + add > budget - reserve:
            break
        shown.append(name)
        length += add
    left_out = len(names) - len(shown)
    return f"{separator.join(shown)} {ELLIPSIS} and {left_out} more".lstrip()


def bound_message(message: str, limit: int = MAX_CONDITION_MESSAGE) -> str:
    """``message``, cut to at most ``limit`` characters, saying how much was left out."""
    if len(message) <= limit:
        return message
    suffix = f" {ELLIPSIS} (cut from {len(message)} characters)"
    if len(suffix) >= limit:
        return message[:limit]
    return message[:limit - len(suffix)] + suffix
