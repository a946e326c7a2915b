"""Why a binding cannot be scheduled: types the caller turns into a ``Scheduled=False`` condition.

Every error carries the condition ``reason`` it maps to (Karmada's reasons for the
``Scheduled`` condition of a ResourceBinding: ``NoClusterFit`` when no cluster passes
the filters, ``Unschedulable`` otherwise) and a message written for the user.
"""

from __future__ import annotations

NO_CLUSTER_FIT = "NoClusterFit"
"""Condition reason: every cluster was filtered out."""

UNSCHEDULABLE = "Unschedulable"
"""Condition reason: clusters fit, but the placement cannot be satisfied on them."""


class ScheduleError(Exception):
    """A binding cannot be scheduled; ``str(error)`` is the condition's message."""

    reason: str = UNSCHEDULABLE


class InvalidPlacement(ScheduleError):
    """The placement itself is wrong (fixing it needs a policy change, not a cluster)."""


class InvalidReplicas(InvalidPlacement):
    """A negative replica count."""


class InvalidWeights(InvalidPlacement):
    """Static weights that are negative or sum to zero."""


class ContradictorySpread(InvalidPlacement):
    """Spread constraints that no set of clusters can satisfy (e.g. minGroups > maxGroups)."""


class SpreadUnsatisfiable(ScheduleError):
    """The feasible clusters form fewer groups (or clusters) than the constraints' minimum."""


class NotEnoughReplicas(ScheduleError):
    """The selected clusters together cannot take the replicas to place."""

    def __init__(self, available: int, needed: int, *, what: str = "replicas") -> None:
        self.available = available
        self.needed = needed
        self.missing = needed - available
        super().__init__(
            f"the selected clusters can take {available} more replicas but {needed} {what} "
            f"must be placed: {self.missing} missing"
        )


class NoClusters(ScheduleError):
    """Nothing left to assign replicas to."""
