"""Exponential backoff with jitter, shared by every retry loop in the project.

One policy object instead of ad-hoc sleeps: the client retries transient API
errors with it, and controllers use it to space out failed reconciles.
"""

from __future__ import annotations

import dataclasses
import random


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Delays ``initial * factor**n`` capped at ``maximum``, with +/- ``jitter``."""

    initial: float = 0.2
    factor: float = 2.0
    maximum: float = 10.0
    jitter: float = 0.2
    attempts: int = 6

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.factor < 1 or self.maximum < self.initial:
            raise ValueError(f"invalid backoff {self}")
        if not 0 <= self.jitter < 1 or self.attempts < 1:
            raise ValueError(f"invalid backoff {self}")

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """The pause after failed attempt number ``attempt`` (0-based)."""
        base = min(self.maximum, self.initial * self.factor**attempt)
        spread = (rng or random).uniform(-self.jitter, self.jitter)
        return base * (1 + spread)


DEFAULT = Backoff()
NO_RETRY = Backoff(attempts=1)
