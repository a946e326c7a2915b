"""Kubernetes wire timestamps for the pure decision modules, which may not import the core's API.

``metav1.Time`` is RFC 3339 in whole seconds, UTC (``2026-01-02T03:04:05Z``).
The core's :mod:`clusterhealth_core.api.meta` has the same pair, but it
brings the API package (and its clock) along, which the purity contract of
the decision modules forbids.
"""

from __future__ import annotations

import datetime


def parse_time(value: object) -> datetime.datetime | None:
    """An RFC 3339 timestamp as an aware UTC datetime in whole seconds (None: absent or bad)."""
    if not value or not isinstance(value, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.astimezone(datetime.UTC).replace(microsecond=0)


def format_time(moment: datetime.datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` in UTC."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
