"""The workload of the remedy scale benchmarks: N Clusters, M Remedies, and their answers.

Split from ``bench.remedy`` so that the processes the benchmark starts (the
bare writer of ``bench.bare_writes``) can build the same workload in the
runtime virtualenv, without the local environment's dependencies.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

from clusterhealth_core.api import remedy as remedy_api
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import conditions
from clusterhealth_remedy import decision

DNS = "ServiceDomainNameResolutionReady"
TC = ["TrafficControl"]


def cluster_obj(name: str) -> dict[str, Any]:
    """A Cluster (never reached: the controllers read only its conditions)."""
    return {"apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"}}


async def set_condition(api: kube.ApiClient, cluster: str, value: str) -> None:
    """Write the DNS condition as the agent does, through its status writer.

    One server-side apply where conditions are a list-map, a guarded
    read-modify-write where they are atomic (Karmada's Cluster API).
    """
    await conditions.set_condition(api, cluster, DNS, value, manager="bench-agent",
                                   reason="Bench", message=value,
                                   transition="2026-01-01T00:00:00Z")


def remedy_obj(name: str, clusters: Sequence[str] | None, match: tuple[str, str, str]
               ) -> dict[str, Any]:
    """A TrafficControl Remedy with one condition match (no affinity: every cluster)."""
    spec: dict[str, Any] = {"actions": TC, "decisionMatches": [{"clusterConditionMatch": {
        "conditionType": match[0], "operator": match[1], "conditionStatus": match[2]}}]}
    if clusters is not None:
        spec["clusterAffinity"] = {"clusterNames": list(clusters)}
    return {"apiVersion": resources.REMEDIES.api_version, "kind": "Remedy",
            "metadata": {"name": name}, "spec": spec}


def actions_of(obj: dict[str, Any]) -> tuple[str, ...]:
    """``status.remedyActions`` of a Cluster."""
    return tuple((obj.get("status") or {}).get("remedyActions") or [])


async def bounded(jobs: Sequence[Any], limit: int = 16) -> None:
    """Await coroutines, ``limit`` at a time."""
    gate = asyncio.Semaphore(limit)

    async def run(job: Any) -> None:
        async with gate:
            await job

    await asyncio.gather(*(run(job) for job in jobs))


# --- reaction latency ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Workload:
    """N Clusters and M Remedies: M-1 name a group of Clusters each, one covers every Cluster.

    The named Remedies match DNS=False (every 7th Cluster is False); the one
    covering every Cluster (``scale-all``, last) at first matches nothing, and
    its changed spec (DNS NotEqual Unknown) matches every Cluster.
    """

    clusters: tuple[str, ...]
    conditions: dict[str, str]
    remedies: tuple[dict[str, Any], ...]
    changed: dict[str, Any]
    group: int

    @classmethod
    def build(cls, n_clusters: int, n_remedies: int) -> Workload:
        """The workload for ``n_clusters`` Clusters and ``n_remedies`` Remedies."""
        clusters = tuple(f"scale-{i:04d}" for i in range(n_clusters))
        conditions = {c: ("False" if i % 7 == 0 else "True") for i, c in enumerate(clusters)}
        group = max(1, n_clusters // max(1, n_remedies - 1))
        remedies = [remedy_obj(f"scale-{i:03d}", clusters[i * group:(i + 1) * group],
                               (DNS, "Equal", "False")) for i in range(n_remedies - 1)]
        remedies.append(remedy_obj("scale-all", None, ("Ready", "Equal", "False")))
        changed = dict(remedies[-1])
        changed["spec"] = {**changed["spec"], "decisionMatches": [{"clusterConditionMatch": {
            "conditionType": DNS, "operator": "NotEqual", "conditionStatus": "Unknown"}}]}
        return cls(clusters, conditions, tuple(remedies), changed, group)

    def decisions(self, changed: bool) -> dict[str, decision.Decision]:
        """Every Cluster's decision with the base or the changed ``scale-all``."""
        bodies = [*self.remedies[:-1], self.changed if changed else self.remedies[-1]]
        parsed = [remedy_api.Remedy.from_dict(r) for r in bodies]
        return {c: decision.decide(c, {DNS: self.conditions[c]}, parsed) for c in self.clusters}

    def expected(self, changed: bool) -> dict[str, tuple[str, ...]]:
        """Every Cluster's remedyActions with the base or the changed ``scale-all``."""
        return {c: d.actions for c, d in self.decisions(changed).items()}

    @property
    def writes(self) -> int:
        """How many Clusters' owned status differs between the base and the change."""
        base, changed = self.decisions(False), self.decisions(True)
        return sum(decision.status_patch(base[c]) != decision.status_patch(changed[c])
                   for c in self.clusters)

    @property
    def label(self) -> str:
        """``1,000 Clusters, 100 Remedies``."""
        return f"{len(self.clusters):,} Clusters, {len(self.remedies):,} Remedies"

    async def create(self, api: kube.ApiClient) -> None:
        """Create the Clusters (with their condition) and the Remedies."""
        await bounded([api.create(resources.CLUSTERS, cluster_obj(c)) for c in self.clusters])
        await bounded([set_condition(api, c, self.conditions[c]) for c in self.clusters])
        await bounded([api.create(resources.REMEDIES, r) for r in self.remedies])

    async def reset(self, api: kube.ApiClient) -> None:
        """Back to the state before any controller ran: no remedyActions, base ``scale-all``.

        Every start then begins from the same state (the DNS=False Clusters a
        Remedy names need a write), whichever controller ran before.
        """
        await api.patch(resources.REMEDIES, "scale-all", {"spec": self.remedies[-1]["spec"]})
        listing = await api.list(resources.CLUSTERS)
        dirty = [i["metadata"]["name"] for i in listing["items"]
                 if i["metadata"]["name"] in self.conditions
                 and (i.get("status") or {}).keys() & {"remedyActions", "remedyActionSources"}]
        await bounded([api.patch(resources.CLUSTERS, name, {"status": {
            "remedyActions": None, "remedyActionSources": None}}, subresource="status")
            for name in dirty])


