"""Messages that fit where they go: conditions and Events have size limits.

A condition message longer than the CRD's ``maxLength`` (32 KiB) makes the
API server refuse the *whole* status write (422), and retrying cannot fix
it; an Event message is cut at 1 KiB by the recorder.  The MCI controller
builds messages from lists that grow with the user's input (routes,
clusters, backends), so it cuts them here, on whole items, and says how many
were left out, rather than letting a long list cost the status.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_CONDITION_MESSAGE = 2048
"""What the controller writes into one condition message (the API allows 32768)."""
MAX_EVENT_MESSAGE = 1000
"""What it puts into one Event message (the recorder cuts at 1024 bytes)."""


def listing(items: Sequence[str], limit: int, *, separator: str = "; ") -> str:
    """``items`` joined, cut at a whole item to fit ``limit`` characters, with a count.

    The tail says how many items were left out: ``"a; b; ... and 3 more"``.
    When not even the first item fits, it is cut itself (:func:`truncate`).
    """
    whole = separator.join(items)
    if len(whole) <= limit:
        return whole
    kept: list[str] = []
    for index, item in enumerate(items):
        candidate = separator.join([*kept, item]) + _more(separator, len(items) - index - 1)
        if len(candidate) > limit:
            break
        kept.append(item)
    left = len(items) - len(kept)
    if kept:
        return separator.join(kept) + _more(separator, left)
    tail = _more(separator, left - 1)
    return (truncate(items[0], max(limit - len(tail), 0)) + tail)[:limit]


def _more(separator: str, count: int) -> str:
    return f"{separator}... and {count} more" if count else ""


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    keep = limit - len(f"... ({len(text)} more characters)")
    if keep <= 0:
        return text[:limit]
    return text[:keep] + f"... ({len(text) - keep} more characters)"
