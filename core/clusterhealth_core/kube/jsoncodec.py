"""The API client's JSON: every watch event, request body and response body goes through it.

A controller decodes every watch event of what it caches and encodes every write;
at 1,000 Clusters that is most of its own CPU, and on a flip's path (the event
decoded, the Cluster cached, the write encoded) the standard library's ``json``
cost about a tenth of our process's part of the reaction.  ``orjson`` does the
same in a fraction of the time (decision 0013).

What differs from :mod:`json`, and how it is kept safe:

* :func:`dumps` returns compact UTF-8 ``bytes`` (no spaces, non-ASCII as is): what
  an API server accepts, and what the API server itself writes.
* ``orjson`` refuses what :mod:`json` would convert: keys that are not strings,
  integers beyond 64 bits.  :func:`dumps` then falls back to :mod:`json`, so a
  body either library can encode is encoded; one neither can is a ``TypeError``
  (or ``ValueError``) as before.
* :func:`loads` raises a ``ValueError`` (``orjson.JSONDecodeError`` is a
  ``json.JSONDecodeError``) for what is not JSON, as :func:`json.loads` does.  It
  reads an integer beyond 64 bits as a float; an API server never writes one
  (Go decodes such a number as a float64 first).
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(obj: Any) -> bytes:
    """``obj`` as compact JSON (UTF-8)."""
    try:
        return orjson.dumps(obj)
    except TypeError:  # a key that is not a string, an integer beyond 64 bits
        return json.dumps(obj, separators=(",", ":")).encode()


def loads(data: str | bytes) -> Any:
    """The value of a JSON document; ``ValueError`` when it is not one."""
    return orjson.loads(data)
