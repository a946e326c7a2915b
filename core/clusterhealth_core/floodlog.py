"""Log lines about single objects, which a mass change would turn into a flood.

A Remedy edited to cover 5,000 Clusters changes every one of them within
seconds.  One INFO line per Cluster is 5,000 lines an operator scrolls past
looking for the one that matters, and at that scale the formatting and
writing of those lines took about a tenth of the remedy controller's CPU
(decision 0005), CPU it shares with the API server it is writing to.

:class:`SampledLog` writes such lines one by one up to a rate (``burst`` at
once, then ``qps`` a second), like client-go's Event rate limits, and counts
the rest under a short summary key (``TrafficControl added``).  Once an
``interval`` after the first line it left out, one line says how many lines
were left out, by key, so the log still tells what happened and how much.
An ordinary incident (a few Clusters) is logged in full; Events and metrics
keep the per-object record.

The clock is the loop's (:class:`clusterhealth_core.clock.Clock`), so tests
run on fake time; the summary is scheduled on the running loop.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging

from clusterhealth_core import clock as clocks


@dataclasses.dataclass(frozen=True)
class Rate:
    """How many lines are written one by one: ``burst`` at once, then ``qps`` a second."""

    qps: float = 5.0
    burst: int = 50
    interval: float = 10.0
    """Seconds from the first line left out to the summary of those left out."""

    def __post_init__(self) -> None:
        if self.qps <= 0 or self.burst < 1 or self.interval <= 0:
            raise ValueError(f"invalid log rate {self}")


class SampledLog:
    """One logger's per-object lines at one level, sampled past a rate, summarised."""

    def __init__(self, logger: logging.Logger, what: str, *, rate: Rate = Rate(),
                 level: int = logging.INFO, clock: clocks.Clock | None = None) -> None:
        self.logger = logger
        self.what = what
        """What a line is about, for the summary: ``cluster change(s)``."""
        self.rate = rate
        self.level = level
        self.clock = clock or clocks.Clock()
        self._tokens = float(rate.burst)
        self._at: float | None = None
        self._left_out: collections.Counter[str] = collections.Counter()
        self._summary: asyncio.TimerHandle | None = None

    def log(self, key: str, message: str, *args: object) -> None:
        """Log ``message % args``, or count it under ``key`` if the rate is spent."""
        if not self.logger.isEnabledFor(self.level):
            return
        if self._take():
            self.logger.log(self.level, message, *args)
            return
        self._left_out[key] += 1
        if self._summary is None:
            self._summary = asyncio.get_running_loop().call_later(self.rate.interval,
                                                                  self.flush)

    def _take(self) -> bool:
        now = self.clock.monotonic()
        if self._at is not None:
            self._tokens = min(float(self.rate.burst),
                               self._tokens + (now - self._at) * self.rate.qps)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def flush(self) -> None:
        """Log the summary of the lines left out since the last one (none: nothing)."""
        if self._summary is not None:
            self._summary.cancel()
            self._summary = None
        if not self._left_out:
            return
        total = sum(self._left_out.values())
        detail = ", ".join(f"{key}: {count:,}" for key, count in sorted(self._left_out.items()))
        self._left_out.clear()
        self.logger.log(self.level, "%s more %s not logged one by one (over %g a second): %s",
                        f"{total:,}", self.what, self.rate.qps, detail)
