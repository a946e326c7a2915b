"""Status writes that never overwrite another writer's fields.

Several writers share one ``Cluster.status``: the cluster-status controller
(``Ready``), the agent (``ServiceDomainNameResolutionReady`` and other probe
conditions) and the remedy controller (``remedyActions``).  Each writes with
server-side apply under its own field manager; the CRD declares
``status.conditions`` a list-map keyed by ``type``, so the API server merges
condition by condition and a writer owns exactly the entries it applies.
(Karmada's status controller once erased ``remedyActions`` by writing the
whole status: its PR 5030.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clusterhealth_core.api import meta
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources


def live_conditions(obj: Mapping[str, Any]) -> tuple[meta.Condition, ...]:
    """The conditions of a live object (entries that do not parse are skipped)."""
    parsed: list[meta.Condition] = []
    for raw in (obj.get("status") or {}).get("conditions") or []:
        try:
            parsed.append(meta.Condition.from_dict(raw))
        except meta.ValidationError:
            continue
    return tuple(parsed)


def keep_transition_times(
    live: Iterable[meta.Condition], desired: Sequence[meta.Condition]
) -> list[meta.Condition]:
    """``desired``, keeping ``live``'s ``lastTransitionTime`` where the status is unchanged."""
    current = tuple(live)
    result = []
    for condition in desired:
        merged = meta.set_condition(current, condition)
        found = meta.find_condition(merged, condition.type)
        assert found is not None
        result.append(found)
    return result


async def apply_status(
    api: kube.ApiClient,
    resource: resources.Resource,
    name: str,
    status: Mapping[str, Any],
    *,
    field_manager: str,
    namespace: str | None = None,
) -> dict[str, Any]:
    """Server-side apply ``status`` (the fields this manager owns) to the status subresource."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return await api.apply(
        resource, {"metadata": metadata, "status": dict(status)},
        field_manager=field_manager, subresource="status",
    )


async def apply_conditions(
    api: kube.ApiClient,
    resource: resources.Resource,
    name: str,
    conditions: Sequence[meta.Condition],
    *,
    field_manager: str,
    namespace: str | None = None,
) -> dict[str, Any]:
    """Apply this writer's conditions; the others' conditions are left alone."""
    return await apply_status(
        api, resource, name, {"conditions": [c.to_dict() for c in conditions]},
        field_manager=field_manager, namespace=namespace,
    )
