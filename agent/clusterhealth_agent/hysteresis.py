"""Per-node hysteresis: a change is adopted only after it has persisted.

The reported state flips from healthy to failing only after failing
observations persisted for the failure threshold, and back only after
successes persisted for the success threshold; any observation matching the
reported state resets the timer (a flap changes nothing).  The seed's text
swaps the two flag names; this is the meaning users expect (reference §3).

Pure logic: time is passed in, so tests are tables, not sleeps.
"""

from __future__ import annotations

import dataclasses

from clusterhealth_agent.probes import base

_EPSILON = 1e-6
"""Rounds are scheduled at exact multiples of the period; absorb float rounding."""


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """How long a new observation must persist before it is adopted."""

    failure: float
    success: float

    def __post_init__(self) -> None:
        if self.failure < 0 or self.success < 0:
            raise ValueError("thresholds must be >= 0")


@dataclasses.dataclass
class Filter:
    """The hysteresis state of one probe on one node."""

    thresholds: Thresholds
    reported: base.ProbeResult | None = None
    """The adopted result (None until the first observation)."""
    pending_since: float | None = None
    """When observations started disagreeing with ``reported``."""

    def observe(self, result: base.ProbeResult, now: float) -> base.ProbeResult:
        """Feed one observation made at ``now``; return the (possibly new) reported result.

        The first observation is adopted at once: with no earlier state there
        is nothing to protect from a flap.  While the state holds, the reported
        result is refreshed (same ok-ness, newest reason and message).
        """
        if self.reported is None or result.ok == self.reported.ok:
            self.reported = result
            self.pending_since = None
            return result
        if self.pending_since is None:
            self.pending_since = now
        threshold = self.thresholds.success if result.ok else self.thresholds.failure
        if now - self.pending_since >= threshold - _EPSILON:
            self.reported = result
            self.pending_since = None
        return self.reported
