"""The scheduler's plugin interface: what a plugin sees, what it answers, and which plugins run.

Plugins see three views, own frozen dataclasses rather than the API models, so that
they stay pure and the scheduler process adapts whatever models it reads to them:

- :class:`PlacementView`: the policy's placement (affinity, tolerations, spread
  constraints, replica scheduling);
- :class:`BindingView`: the binding's resource, replicas, current targets and the
  clusters it is being evicted from;
- :class:`ClusterView`: a member cluster's labels, topology, taints, served APIs and
  capacity.

The scheduler builds one :class:`Cycle` per binding (the placement and binding views,
and what every plugin derives from them, computed once) and passes it with each cluster,
as Karmada's framework passes its ``CycleState`` and binding spec.
A :class:`FilterPlugin` says whether a cluster fits (with a reason when not); a
:class:`ScorePlugin` gives a fitting cluster 0..100. A :data:`Registry` maps plugin
names to plugins, in the order they run; :func:`select_plugins` applies the
``--plugins`` flag (Karmada's syntax: ``*`` for all, ``-name`` to leave one out).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping, Sequence
from typing import ClassVar, Protocol, runtime_checkable

from clusterhealth_controlplane.scheduler import assignment, spread
from clusterhealth_core import selection

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"

DUPLICATED = "Duplicated"
DIVIDED = "Divided"
WEIGHTED = "Weighted"
AGGREGATED = "Aggregated"
AVAILABLE_REPLICAS = "AvailableReplicas"

MIN_SCORE = 0
MAX_SCORE = 100

_EMPTY: Mapping[str, str] = types.MappingProxyType({})


@dataclasses.dataclass(frozen=True)
class Taint:
    """A cluster taint (``spec.taints[]``)."""

    key: str
    effect: str
    value: str = ""

    def __str__(self) -> str:
        """Kubernetes' ``Taint.ToString``: ``key=value:effect`` (``key:effect`` without value)."""
        if self.value:
            return f"{self.key}={self.value}:{self.effect}"
        return f"{self.key}:{self.effect}"


@dataclasses.dataclass(frozen=True)
class Toleration:
    """A placement toleration (``clusterTolerations[]``)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ``Toleration.ToleratesTaint`` (without the Lt/Gt operators)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False


@dataclasses.dataclass(frozen=True)
class Requirement:
    """A selector requirement: ``key``, ``operator`` (In, NotIn, Exists, ...), ``values``."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class LabelSelector:
    """A Kubernetes label selector: ``matchLabels`` and ``matchExpressions``."""

    match_labels: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY)
    match_expressions: tuple[Requirement, ...] = ()


@dataclasses.dataclass(frozen=True)
class ClusterAffinity:
    """``clusterAffinity``: names, excluded names, label selector, field selector.

    ``field_selector`` holds requirements on ``provider``, ``region`` and ``zone``.
    """

    cluster_names: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    label_selector: LabelSelector | None = None
    field_selector: tuple[Requirement, ...] = ()


@dataclasses.dataclass(frozen=True)
class StaticWeight:
    """``staticWeightList[]``: the clusters ``target`` selects weigh ``weight``."""

    target: ClusterAffinity
    weight: int


@dataclasses.dataclass(frozen=True)
class WeightPreference:
    """``weightPreference``: a static weight list, or ``dynamic_weight: AvailableReplicas``."""

    static_weights: tuple[StaticWeight, ...] = ()
    dynamic_weight: str = ""


@dataclasses.dataclass(frozen=True)
class ReplicaScheduling:
    """``replicaScheduling``: Duplicated or Divided, and how Divided divides."""

    type: str = DUPLICATED
    division_preference: str = ""
    weight_preference: WeightPreference | None = None

    @property
    def strategy(self) -> assignment.Strategy:
        """Karmada's strategy type (Divided without a preference is Weighted, as defaulted)."""
        if self.type != DIVIDED:
            return assignment.Strategy.DUPLICATED
        if self.division_preference == AGGREGATED:
            return assignment.Strategy.AGGREGATED
        if self.weight_preference is not None and self.weight_preference.dynamic_weight:
            return assignment.Strategy.DYNAMIC_WEIGHT
        return assignment.Strategy.STATIC_WEIGHT


@dataclasses.dataclass(frozen=True)
class PlacementView:
    """What the scheduler reads from a placement."""

    affinity: ClusterAffinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    spread_constraints: tuple[spread.SpreadConstraint, ...] = ()
    replica_scheduling: ReplicaScheduling | None = None

    @property
    def strategy(self) -> assignment.Strategy:
        """Duplicated unless the placement divides (Karmada: no replicaScheduling is Duplicated)."""
        if self.replica_scheduling is None:
            return assignment.Strategy.DUPLICATED
        return self.replica_scheduling.strategy

    @property
    def spread_ignored(self) -> bool:
        """Karmada's ``shouldIgnoreSpreadConstraint``: static weights override spreading."""
        scheduling = self.replica_scheduling
        if scheduling is None or scheduling.type != DIVIDED:
            return False
        if scheduling.division_preference not in ("", WEIGHTED):
            return False
        preference = scheduling.weight_preference
        return preference is None or (
            bool(preference.static_weights) and not preference.dynamic_weight
        )


@dataclasses.dataclass(frozen=True)
class BindingView:
    """What the scheduler reads from a (Cluster)ResourceBinding.

    ``clusters`` is ``spec.clusters`` in its order; ``evicting_from`` holds the
    ``fromCluster`` of its graceful eviction tasks; ``uid`` is the resource template's UID
    (``spec.resource.uid``), which breaks ties in the Webster method as Karmada does;
    ``has_replica_requirements`` makes a binding with 0 replicas still a workload.
    """

    api_version: str
    kind: str
    replicas: int = 0
    clusters: tuple[assignment.TargetCluster, ...] = ()
    evicting_from: frozenset[str] = frozenset()
    uid: str = ""
    has_replica_requirements: bool = False

    @property
    def target_names(self) -> frozenset[str]:
        """The clusters in the current result."""
        return frozenset(target.name for target in self.clusters)

    @property
    def is_workload(self) -> bool:
        """Karmada's ``IsWorkload``: replicas, or per-replica requirements."""
        return self.replicas > 0 or self.has_replica_requirements

    def assigned(self, cluster: str) -> int:
        """Replicas the current result gives ``cluster``."""
        for target in self.clusters:
            if target.name == cluster:
                return target.replicas
        return 0


@dataclasses.dataclass(frozen=True)
class ClusterView:
    """What the scheduler reads from a Cluster.

    ``api_enablements`` maps ``group/version`` (``v1`` for the core group) to the kinds
    the cluster serves; ``None`` while not collected yet. ``api_enablements_complete``
    is false when the collected list may lack some APIs (Karmada's
    ``CompleteAPIEnablements`` condition not True). ``available_replicas`` is how many
    more replicas of the binding's workload the cluster can take.
    """

    name: str
    labels: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY)
    provider: str = ""
    region: str = ""
    zones: tuple[str, ...] = ()
    taints: tuple[Taint, ...] = ()
    api_enablements: Mapping[str, frozenset[str]] | None = None
    api_enablements_complete: bool = True
    available_replicas: int = 0
    deleting: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Cycle:
    """One binding's scheduling cycle: what every plugin reads besides the cluster.

    Built once per :func:`~.algorithm.schedule` call, before the clusters are filtered:
    ``target_names`` (the binding's current targets) is computed here once instead of
    once per plugin and cluster.
    """

    placement: PlacementView
    binding: BindingView
    target_names: frozenset[str]

    @classmethod
    def of(cls, placement: PlacementView, binding: BindingView) -> Cycle:
        """The cycle for ``binding`` under ``placement``."""
        return cls(placement, binding, binding.target_names)


@dataclasses.dataclass(frozen=True)
class Result:
    """A filter's answer: ``ok``, or not with the ``reason`` (completing "cluster NAME ...")."""

    ok: bool
    reason: str = ""


FIT = Result(True)
"""The answer of a filter that lets a cluster pass."""


class Named(Protocol):
    """What every plugin has: a name."""

    @property
    def name(self) -> str:
        """The plugin's name in the registry and in ``--plugins``."""
        ...


@runtime_checkable
class FilterPlugin(Named, Protocol):
    """Decides whether a cluster fits a binding."""

    def filter(self, cycle: Cycle, cluster: ClusterView) -> Result:
        """Whether ``cluster`` fits; when not, why."""
        ...


@runtime_checkable
class ScorePlugin(Named, Protocol):
    """Ranks the clusters that fit: 0 (least preferred) .. 100."""

    def score(self, cycle: Cycle, cluster: ClusterView) -> int:
        """The cluster's score, ``MIN_SCORE``..``MAX_SCORE``."""
        ...


class Filter:
    """What the filter plugins share: a name, and Karmada's "a current target fits" rule.

    A subclass sets ``name`` and writes :meth:`check`. With ``current_targets_fit`` a
    cluster already in the binding's result passes without being checked, as in Karmada's
    APIEnablement and TaintToleration: an API removed or a taint added later must not make
    the scheduler move a workload that runs (evicting is the taint manager's call).
    """

    name: ClassVar[str]
    current_targets_fit: ClassVar[bool] = False

    def filter(self, cycle: Cycle, cluster: ClusterView) -> Result:
        """:data:`FIT` for a current target when ``current_targets_fit``, else :meth:`check`."""
        if self.current_targets_fit and cluster.name in cycle.target_names:
            return FIT
        return self.check(cycle, cluster)

    def check(self, cycle: Cycle, cluster: ClusterView) -> Result:
        """Whether ``cluster`` fits; when not, why (each plugin writes its own)."""
        raise NotImplementedError


Plugin = FilterPlugin | ScorePlugin
Registry = dict[str, Plugin]
"""Plugins by name, in the order they run."""


class PluginSelectionError(ValueError):
    """A ``--plugins`` value names a plugin the registry does not have."""


def select_plugins(registry: Mapping[str, Plugin], plugins: str | Sequence[str]) -> Registry:
    """Apply ``--plugins``: names, ``*`` (all) and ``-name`` (not that one), comma separated.

    The result keeps the registry's order. Raises :class:`PluginSelectionError` for a
    name the registry lacks, listing the known names.
    """
    try:
        selected = set(selection.select(list(registry), plugins, "scheduler plugin"))
    except selection.UnknownName as exc:
        raise PluginSelectionError(str(exc)) from exc
    return {name: plugin for name, plugin in registry.items() if name in selected}
