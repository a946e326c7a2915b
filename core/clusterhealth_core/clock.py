"""The clock every component takes as a parameter instead of calling ``time``.

Durations come from the event loop's clock (so tests can run on fake time with
``looptime``); timestamps written to the API come from :meth:`Clock.now`.
"""

from __future__ import annotations

import asyncio
import datetime


class Clock:
    """Real time: the running loop's monotonic clock and the UTC wall clock."""

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps (the running loop's clock)."""
        return asyncio.get_running_loop().time()

    def now(self) -> datetime.datetime:
        """The current UTC time, timezone-aware."""
        return datetime.datetime.now(datetime.UTC)

    async def sleep(self, seconds: float) -> None:
        """Sleep on the loop's clock."""
        await asyncio.sleep(max(0.0, seconds))


class ManualClock(Clock):
    """A wall clock that tests move by hand; durations still follow the loop."""

    def __init__(self, start: datetime.datetime | None = None) -> None:
        self._now = start or datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    def now(self) -> datetime.datetime:
        """The time set by the test."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the wall clock forward."""
        self._now += datetime.timedelta(seconds=seconds)


def format_rfc3339(moment: datetime.datetime, *, micro: bool = False) -> str:
    """Kubernetes' time format: ``Time`` (seconds) or ``MicroTime`` (microseconds), UTC."""
    utc = moment.astimezone(datetime.UTC)
    if micro:
        return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return utc.strftime("%Y-%m-%dT%H:%M:%SZ")

