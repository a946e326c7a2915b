"""``--detectors '*,-dns'``, ``--plugins``, ``--controllers``: one syntax for picking parts.

Every process that runs a set of named parts (the agent's detectors, the
scheduler's plugins, the controller manager's controllers) takes the same flag
syntax, Karmada's: comma-separated names, ``*`` for every known part, ``-name``
to leave one out.  Pure and dependency-free, so pure modules may use it.
"""

from __future__ import annotations

from collections.abc import Sequence


class UnknownName(ValueError):
    """The selection names a part that is not known; the message lists the known ones."""


def select(known: Sequence[str], items: str | Sequence[str], what: str) -> list[str]:
    """The chosen names, in the order they were first chosen (``*`` adds ``known``'s order).

    ``what`` names the kind of part in the error (``"detector"``, ``"controller"``).
    """
    entries = items.split(",") if isinstance(items, str) else list(items)
    chosen: list[str] = []
    excluded: set[str] = set()
    for raw in entries:
        item = raw.strip()
        if not item:
            continue
        name = item[1:] if item.startswith("-") else item
        if name != "*" and name not in known:
            raise UnknownName(f"unknown {what} {name!r}; known {what}s: {', '.join(known)} "
                              "(or * for all)")
        if item.startswith("-"):
            excluded.add(name)
        elif name == "*":
            chosen.extend(n for n in known if n not in chosen)
        elif name not in chosen:
            chosen.append(name)
    return [name for name in chosen if name not in excluded]
