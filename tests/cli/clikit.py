"""Shared by the CLI tests: Remedy manifests as the API holds them."""

from __future__ import annotations

from typing import Any

DNS = "ServiceDomainNameResolutionReady"
TC = "TrafficControl"


def remedy(name: str, clusters: list[str] | None = None,
           match: tuple[str, str, str] | None = (DNS, "Equal", "False"),
           actions: list[str] | None = None) -> dict[str, Any]:
    """A Remedy; ``clusters`` None: no affinity, ``match`` None: immediate."""
    spec: dict[str, Any] = {"actions": [TC] if actions is None else actions}
    if clusters is not None:
        spec["clusterAffinity"] = {"clusterNames": clusters}
    if match is not None:
        spec["decisionMatches"] = [{"clusterConditionMatch": {
            "conditionType": match[0], "operator": match[1], "conditionStatus": match[2]}}]
    return {"apiVersion": "remedy.karmada.io/v1alpha1", "kind": "Remedy",
            "metadata": {"name": name}, "spec": spec}
