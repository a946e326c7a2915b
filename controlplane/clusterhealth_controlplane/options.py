"""The failover timers and limits, grouped by the behaviour they tune.

Karmada spreads these over a dozen flags of ``karmada-controller-manager``;
here each group is one frozen, documented object, validated once in
:mod:`clusterhealth_controlplane.settings` and handed to the controllers
through :class:`clusterhealth_controlplane.manager.Context`.  Defaults are
Karmada's (seed ``000_…``), so a user who knows its flags finds the same
numbers under the same names.
"""

from __future__ import annotations

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class ClusterHealth:
    """How the cluster-status controller decides whether a member is Ready."""

    update_frequency: float = 10.0
    """``--cluster-status-update-frequency``: probe each Push member this often."""
    success_threshold: float = 30.0
    """``--cluster-success-threshold``: healthy for this long before Ready turns True."""
    failure_threshold: float = 30.0
    """``--cluster-failure-threshold``: unhealthy for this long before Ready turns False."""
    monitor_grace_period: float = 40.0
    """``--cluster-monitor-grace-period``: no probe result for this long -> Ready Unknown."""
    probe_timeout: float = 5.0
    """``--cluster-probe-timeout``: one ``/readyz`` request gives up after this long."""


@dataclasses.dataclass(frozen=True)
class Taints:
    """How conditions become taints on the Cluster."""

    failover_eviction_timeout: float = 300.0
    """``--failover-eviction-timeout``: NoSchedule for this long -> the NoExecute taint too."""


@dataclasses.dataclass(frozen=True)
class Eviction:
    """How fast bindings leave NoExecute-tainted clusters, and when to hold back."""

    rate: float = 0.5
    """``--eviction-rate``: evictions per second (0: no limit)."""
    secondary_rate: float = 0.1
    """``--secondary-eviction-rate``: the rate while the storm guard holds (0: stop)."""
    unhealthy_cluster_threshold: float = 0.55
    """``--unhealthy-cluster-threshold``: more than this fraction of clusters unhealthy at
    once -> the storm guard holds (the fault is most likely the control plane's network)."""
    workers: int = 16
    """``--eviction-workers``: concurrent evictions (each one binding write; with a failover's
    other writes queued at the API server, 4 kept evictions at 2 s each, 2/s: issue 22)."""
    graceful_eviction_timeout: float = 600.0
    """``--graceful-eviction-timeout``: a graceful-eviction task ends after this long at most."""
    purge_mode: str = "Gracefully"
    """``--no-execute-taint-eviction-purge-mode``: the eviction task's ``purgeMode`` for a
    binding without ``spec.failover.cluster`` (``Gracefully`` or ``Directly``, Karmada's)."""


@dataclasses.dataclass(frozen=True)
class Failback:
    """Bringing replicas back to a recovered cluster (opt-in per policy)."""

    window: float = 300.0
    """``--failback-stabilization-window``: Ready (and untainted) for this long first."""
    batch: int = 10
    """``--failback-batch``: bindings rebalanced at a time."""


@dataclasses.dataclass(frozen=True)
class Propagation:
    """What the namespace sync leaves out, beside Karmada's reserved namespaces."""

    skipped_namespaces: tuple[re.Pattern[str], ...] = ()
    """``--skipped-propagating-namespaces``: namespaces (regular expressions matched against
    the whole name) the namespace sync never propagates, like Karmada's flag."""


@dataclasses.dataclass(frozen=True)
class Options:
    """Every group, as the controllers receive them."""

    propagation: Propagation = dataclasses.field(default_factory=Propagation)
    health: ClusterHealth = dataclasses.field(default_factory=ClusterHealth)
    taints: Taints = dataclasses.field(default_factory=Taints)
    eviction: Eviction = dataclasses.field(default_factory=Eviction)
    failback: Failback = dataclasses.field(default_factory=Failback)
