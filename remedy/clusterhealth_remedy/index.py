"""Indexes that keep the controller's work proportional to what changed.

Without them every Cluster reconcile evaluated every Remedy, and every
Remedy status scanned every Cluster's decision: at 5,000 Clusters and 500
Remedies that is 2.5 million checks per pass, and a pass happens for each
change (profile in ``docs/decisions/0005-remedy-controller-at-scale.md``).
Here a Cluster finds only the Remedies that can cover it (those naming it,
and those without an affinity), and a Remedy finds the Clusters it acts on.

Pure data structures: no I/O, no clock; the controller feeds them from its
informer events and reconciles.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from clusterhealth_core.api import meta, remedy
from clusterhealth_remedy import decision


@dataclasses.dataclass
class Refusal:
    """Why the model refuses a Remedy (it acts nowhere), and whether that was told."""

    name: str
    problem: str
    told: bool = False
    """A Warning Event said it (one per problem: a new problem is a new refusal)."""


class RemedyIndex:
    """The parsed Remedies, by name and by the clusters they can cover; those refused."""

    def __init__(self) -> None:
        self.remedies: dict[str, remedy.Remedy] = {}
        """Every parsed Remedy by name."""
        self.invalid: dict[str, Refusal] = {}
        """Remedies refused by the model, and why (they act nowhere)."""
        self._everywhere: dict[str, remedy.Remedy] = {}
        """Remedies without an affinity (every cluster, also clusters created later)."""
        self._naming: dict[str, set[str]] = {}
        """Cluster name to the Remedies whose affinity names it."""

    def __len__(self) -> int:
        return len(self.remedies)

    def update(self, name: str, obj: Mapping[str, Any] | None) -> Refusal | None:
        """Index the Remedy object ``obj`` (None: deleted); return a refusal that is new.

        One the model refuses is forgotten as a Remedy and kept in :attr:`invalid`
        (the same problem again keeps its refusal, and what was told of it).
        """
        try:
            parsed = None if obj is None else remedy.Remedy.from_dict(obj)
        except meta.ValidationError as exc:
            self.remove(name)
            known = self.invalid.get(name)
            if known is not None and known.problem == str(exc):
                return None
            self.invalid[name] = Refusal(name, str(exc))
            return self.invalid[name]
        self.invalid.pop(name, None)
        if parsed is None:
            self.remove(name)
        else:
            self.put(parsed)
        return None

    def get(self, name: str) -> remedy.Remedy | None:
        """The Remedy called ``name``, if it is indexed."""
        return self.remedies.get(name)

    def put(self, r: remedy.Remedy) -> remedy.Remedy | None:
        """Index ``r`` (replacing the Remedy of that name); return the one replaced."""
        name = r.metadata.name
        before = self.remove(name)
        self.remedies[name] = r
        affinity = r.spec.cluster_affinity
        if affinity is None:
            self._everywhere[name] = r
        else:
            for cluster_name in affinity.cluster_names:
                self._naming.setdefault(cluster_name, set()).add(name)
        return before

    def remove(self, name: str) -> remedy.Remedy | None:
        """Forget the Remedy ``name``; return it (None if it was not indexed)."""
        gone = self.remedies.pop(name, None)
        if gone is None:
            return None
        self._everywhere.pop(name, None)
        affinity = gone.spec.cluster_affinity
        if affinity is not None:
            for cluster_name in affinity.cluster_names:
                names = self._naming.get(cluster_name)
                if names is not None:
                    names.discard(name)
                    if not names:
                        del self._naming[cluster_name]
        return gone

    def naming(self, cluster_name: str) -> frozenset[str]:
        """The Remedies whose affinity names ``cluster_name``."""
        return frozenset(self._naming.get(cluster_name, ()))

    def candidates(self, cluster_name: str) -> list[remedy.Remedy]:
        """Every Remedy that covers ``cluster_name`` (see :func:`decision.covers`)."""
        found = list(self._everywhere.values())
        found += [self.remedies[name] for name in self._naming.get(cluster_name, ())]
        return found

    def decide(self, cluster_name: str, conditions: Mapping[str, str]) -> decision.Decision:
        """:func:`decision.decide` over the Remedies that can cover the cluster."""
        return decision.decide(cluster_name, conditions, self.candidates(cluster_name))


class ActiveIndex:
    """Which Clusters each Remedy acts on, from the latest decision of every Cluster."""

    def __init__(self) -> None:
        self.decisions: dict[str, decision.Decision] = {}
        """Cluster name to its latest decision."""
        self._acting: dict[str, dict[str, decision.Match]] = {}
        """Remedy name to the Clusters it acts on, with the match that made it act."""

    def get(self, cluster_name: str) -> decision.Decision | None:
        """The latest decision of ``cluster_name``."""
        return self.decisions.get(cluster_name)

    def put(self, result: decision.Decision) -> decision.Decision | None:
        """Record a Cluster's decision; return the previous one."""
        previous = self.remove(result.cluster)
        self.decisions[result.cluster] = result
        for match in result.matches:
            self._acting.setdefault(match.remedy, {})[result.cluster] = match
        return previous

    def remove(self, cluster_name: str) -> decision.Decision | None:
        """Forget a Cluster's decision (it was deleted); return it."""
        previous = self.decisions.pop(cluster_name, None)
        if previous is not None:
            for match in previous.matches:
                acting = self._acting.get(match.remedy)
                if acting is not None:
                    acting.pop(cluster_name, None)
                    if not acting:
                        del self._acting[match.remedy]
        return previous

    def acting(self, remedy_name: str) -> Mapping[str, decision.Match]:
        """The Clusters ``remedy_name`` acts on (cluster name to match)."""
        return self._acting.get(remedy_name, {})

    def values(self) -> Iterable[decision.Decision]:
        """Every recorded decision."""
        return self.decisions.values()
