"""The ``remedy.karmada.io/v1alpha1`` Remedy: which actions to take on which clusters.

A Remedy says "when a cluster in this affinity has a condition matching one of
these decision matches (or immediately, when there are none), perform these
actions".  The remedy controller evaluates it per Cluster.  Beyond Karmada,
the Remedy has a status listing the clusters it is currently active on, so an
operator can see what a Remedy is doing without reading every Cluster.

Absent and empty mean different things, as in Karmada's controller: an absent
``clusterAffinity`` selects every cluster, a present one exactly its
``clusterNames`` (none when empty); absent ``decisionMatches`` act
immediately, an empty list never matches.  The controller tells the user
about the two "never" cases with a condition on the Remedy.
"""

import dataclasses
import datetime
import enum

from clusterhealth_core.api import cluster, groups, meta, wire

MAX_DECISION_MATCHES = 64
"""``spec.decisionMatches`` at most (Karmada's CRD sets no bound)."""
MAX_ACTIONS = 16
"""``spec.actions`` at most (one action is known today)."""
MAX_ACTIVE_CLUSTERS = 1000
"""Entries of ``status.activeClusters`` at most (``maxItems``); the total is in
``status.activeClusterCount``."""


class ClusterConditionOperator(enum.StrEnum):
    """How a cluster condition's status is compared with ``conditionStatus``."""

    EQUAL = groups.OPERATOR_EQUAL
    NOT_EQUAL = groups.OPERATOR_NOT_EQUAL


class RemedyAction(enum.StrEnum):
    """An action the remedy system can perform on a cluster."""

    TRAFFIC_CONTROL = groups.ACTION_TRAFFIC_CONTROL


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterAffinity(wire.Model):
    """The clusters a Remedy applies to.

    An absent ``spec.clusterAffinity`` selects every cluster; a present one
    selects exactly its ``clusterNames``, so ``{}`` or ``clusterNames: []``
    select no cluster (Karmada's controller behaves so, whatever the API's
    comment "if empty, all clusters will be selected" suggests).
    ``clusterNames`` is a set: duplicates are rejected by the API server.
    """

    cluster_names: tuple[str, ...] = dataclasses.field(
        default=(), metadata=wire.json("clusterNames", list_type="set",
                                       max_items=cluster.MAX_CLUSTER_NAMES,
                                       max_length=cluster.NAME_MAX_LENGTH)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterConditionRequirement(wire.Model):
    """A requirement on one condition of the Cluster's status."""

    condition_type: str = dataclasses.field(metadata=wire.json("conditionType", min_length=1))
    operator: ClusterConditionOperator = dataclasses.field(metadata=wire.json("operator"))
    condition_status: meta.ConditionStatus = dataclasses.field(
        metadata=wire.json("conditionStatus"))
    """``True``, ``False`` or ``Unknown``, as conditions hold them: ``"false"`` is refused
    (it would never equal a status, and ``NotEqual`` would hold for every cluster)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecisionMatch(wire.Model):
    """One way a Remedy can be triggered; exactly one kind of match must be set.

    ``clusterConditionMatch`` is the only kind today.  It is optional on the
    wire (room for future kinds, as in Karmada), but an empty match would never
    fire, so it is rejected (``minProperties: 1`` in the CRD).
    """

    cluster_condition_match: ClusterConditionRequirement | None = dataclasses.field(
        default=None, metadata=wire.json("clusterConditionMatch")
    )

    def check(self, path: str) -> None:
        """Reject a match with no requirement in it."""
        if self.cluster_condition_match is None:
            raise wire.ValidationError(path, "must set clusterConditionMatch")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RemedySpec(wire.Model):
    """The desired behaviour of a Remedy."""

    cluster_affinity: ClusterAffinity | None = dataclasses.field(
        default=None, metadata=wire.json("clusterAffinity")
    )
    decision_matches: tuple[DecisionMatch, ...] | None = dataclasses.field(
        default=None, metadata=wire.json("decisionMatches", max_items=MAX_DECISION_MATCHES)
    )
    """Any match triggers the actions; None (absent) means act immediately.

    An empty list is accepted and never matches (Karmada's meaning), the
    opposite of absent; the controller reports it on the Remedy.
    """
    actions: tuple[RemedyAction, ...] = dataclasses.field(
        default=(), metadata=wire.json("actions", max_items=MAX_ACTIONS)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ActiveCluster(wire.Model):
    """A cluster on which the Remedy is currently active."""

    cluster: str = dataclasses.field(metadata=wire.json("cluster", min_length=1))
    matched_condition: ClusterConditionRequirement | None = dataclasses.field(
        default=None, metadata=wire.json("matchedCondition")
    )
    """The decision match that holds; absent for an immediate Remedy."""
    since: datetime.datetime = dataclasses.field(metadata=wire.json("since"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class RemedyStatus(wire.Model):
    """Observed state of a Remedy, written by the remedy controller."""

    conditions: tuple[meta.Condition, ...] = meta.conditions()
    active_clusters: tuple[ActiveCluster, ...] = dataclasses.field(
        default=(),
        metadata=wire.json("activeClusters", max_items=MAX_ACTIVE_CLUSTERS, list_type="map",
                           list_map_keys=("cluster",)),
    )
    """The first :data:`MAX_ACTIVE_CLUSTERS` clusters (by name) the Remedy acts on."""
    active_cluster_count: int = dataclasses.field(
        default=0, metadata=wire.json("activeClusterCount", fmt="int64", minimum=0)
    )
    """How many clusters the Remedy acts on, also those beyond ``activeClusters``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Remedy(meta.Object, resource=groups.REMEDY):
    """remedy.karmada.io/v1alpha1 Remedy (cluster-scoped)."""

    spec: RemedySpec = meta.spec()
    status: RemedyStatus = meta.status(RemedyStatus)
