"""Which MCIs claim each host and path, name each Service, and run on each Cluster.

The controller asks on every event (an MCI changed: which MCIs share its
routes; a Service changed: which MCIs use it; a Cluster's remedy actions
changed: which MCIs are located there) and must not scan every MCI to
answer.  Pure data structures: the controller feeds them from its events
and reconciles.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterhealth_mci import plan
from clusterhealth_mci.providers import plan as routing


class RouteIndex:
    """Every MCI's :class:`~clusterhealth_mci.plan.Analysis`, by route and by Service."""

    def __init__(self) -> None:
        self.analyses: dict[str, plan.Analysis] = {}
        """MCI -> what its spec alone decides."""
        self.claimants: dict[routing.MapEntry, set[str]] = {}
        """Route-table entry -> the MCIs claiming it."""
        self._by_service: dict[tuple[str, str], set[str]] = {}
        self._located: dict[str, frozenset[str]] = {}
        """MCI -> the clusters its Services were last located on."""

    def get(self, key: str) -> plan.Analysis | None:
        """The analysis of MCI ``key``, if it is indexed."""
        return self.analyses.get(key)

    def analyse(self, key: str, obj: Mapping[str, Any]) -> plan.Analysis:
        """The analysis of MCI object ``obj`` (the indexed one while its spec is the same)."""
        known = self.analyses.get(key)
        if known is not None and known.version == plan.spec_version(obj):
            return known
        return plan.analyse(key, obj)

    def update(self, key: str, obj: Mapping[str, Any] | None
               ) -> tuple[plan.Analysis | None, plan.Analysis | None]:
        """Index MCI ``key`` as ``obj`` (None: deleted); return its analyses before and after."""
        before = self.analyses.get(key)
        after = None if obj is None else self.analyse(key, obj)
        namespace = key.partition("/")[0]
        for entry in before.claims if before is not None else ():
            self.claimants.get(entry, set()).discard(key)
            if not self.claimants.get(entry, True):
                del self.claimants[entry]
        for service in before.services if before is not None else ():
            self._by_service.get((namespace, service), set()).discard(key)
        if after is None:
            self.analyses.pop(key, None)
            return before, after
        self.analyses[key] = after
        for entry in after.claims:
            self.claimants.setdefault(entry, set()).add(key)
        for service in after.services:
            self._by_service.setdefault((namespace, service), set()).add(key)
        return before, after

    def sharers(self, key: str, *analyses: plan.Analysis | None) -> list[str]:
        """The MCIs claiming a host and path that ``key`` claims (or claimed)."""
        return [other for analysis in analyses
                for entry in (analysis.claims if analysis is not None else ())
                for other in self.claimants.get(entry, ()) if other != key]

    def using(self, namespace: str, service: str) -> list[str]:
        """The MCIs naming Service ``namespace/service`` as a backend."""
        return list(self._by_service.get((namespace, service), ()))

    def locate(self, key: str, clusters: frozenset[str] | None) -> None:
        """Where MCI ``key``'s Services run now (None: forget it)."""
        if clusters is None:
            self._located.pop(key, None)
        else:
            self._located[key] = clusters

    def located_on(self, cluster: str) -> list[str]:
        """The MCIs whose Services were last located on ``cluster``."""
        return [key for key, located in self._located.items() if cluster in located]
