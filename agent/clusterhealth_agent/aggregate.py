"""The leader's decision: from every node's result to one cluster condition.

Pure function, tested as a table.  Karmada's rule, plus a quorum:

* only Ready nodes count (a NotReady node's probes say nothing about the
  cluster's DNS);
* a Ready node whose result is missing or older than the stale threshold is
  Unknown; if any Ready node is Unknown, the last report is kept (no write);
* the cluster fails when at least ``quorum`` of the Ready nodes fail
  (default 1.0: all of them), otherwise it is healthy.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from clusterhealth_core.api import meta


@dataclasses.dataclass(frozen=True)
class NodeResult:
    """What one node last published for one condition type."""

    status: str
    reason: str
    message: str
    heartbeat: datetime.datetime | None


@dataclasses.dataclass(frozen=True)
class NodeView:
    """One node: whether it is Ready and its published results by condition type."""

    name: str
    ready: bool
    results: Mapping[str, NodeResult]


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The cluster-level outcome for one condition type (``status`` None = keep last)."""

    condition_type: str
    status: bool | None
    reason: str
    message: str


def reasons_for(condition_type: str) -> tuple[str, str]:
    """(success reason, failure reason): ``XReady`` -> (``XReady``, ``XFailed``)."""
    stem = condition_type[: -len("Ready")] if condition_type.endswith("Ready") else condition_type
    return f"{stem}Ready", f"{stem}Failed"


def _state(node: NodeView, ctype: str, now: datetime.datetime, stale: float) -> str:
    result = node.results.get(ctype)
    if result is None or result.heartbeat is None:
        return "Unknown"
    if (now - result.heartbeat).total_seconds() > stale:
        return "Unknown"
    return result.status if result.status in ("True", "False") else "Unknown"


def aggregate(
    condition_type: str,
    nodes: Sequence[NodeView],
    now: datetime.datetime,
    stale: float,
    quorum: float = 1.0,
) -> Verdict:
    """Decide the cluster condition for ``condition_type``."""
    ok_reason, fail_reason = reasons_for(condition_type)
    ready = [n for n in nodes if n.ready]
    if not ready:
        return Verdict(condition_type, None, "NoReadyNodes", "no Ready node to judge by")
    states = {n.name: _state(n, condition_type, now, stale) for n in ready}
    unknown = sorted(name for name, s in states.items() if s == "Unknown")
    if unknown:
        return Verdict(condition_type, None, "NodeResultsUnknown",
                       f"no fresh result from Ready node(s) {', '.join(unknown)}")
    failing = sorted(name for name, s in states.items() if s == "False")
    needed = max(1, math.ceil(quorum * len(ready) - 1e-9))
    if len(failing) >= needed:
        by_name = {n.name: n.results[condition_type] for n in ready if n.name in failing}
        details = "; ".join(
            f"{name}: {by_name[name].reason}: {by_name[name].message}" for name in failing
        )
        return Verdict(condition_type, False, fail_reason,
                       f"{len(failing)}/{len(ready)} Ready nodes failing ({details})"[:4096])
    suffix = f"; failing: {', '.join(failing)}" if failing else ""
    return Verdict(condition_type, True, ok_reason,
                   f"{len(ready) - len(failing)}/{len(ready)} Ready nodes passing{suffix}")


_CONDITION_FIELDS = ("type", "status", "reason", "message", "lastHeartbeatTime")


def slim_node(condition_types: Sequence[str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An informer transform keeping of a Node only what :func:`node_view` reads.

    A kubelet's Node carries images, addresses, capacity and managedFields
    (tens of KiB on big nodes); the leader caches every Node of the member,
    so it keeps the name, the resourceVersion, and the ``Ready`` and probe
    conditions with the fields read here.
    """
    wanted = frozenset(("Ready", *condition_types))

    def transform(node: dict[str, Any]) -> dict[str, Any]:
        meta = node.get("metadata") or {}
        conditions = [
            {k: c[k] for k in _CONDITION_FIELDS if k in c}
            for c in (node.get("status") or {}).get("conditions") or []
            if isinstance(c, dict) and c.get("type") in wanted
        ]
        return {"metadata": {k: meta[k] for k in ("name", "resourceVersion") if k in meta},
                "status": {"conditions": conditions}}

    return transform


def node_view(node: Mapping[str, Any], condition_types: Sequence[str]) -> NodeView:
    """Read a ``Node`` object into a :class:`NodeView`."""
    conditions = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []}
    ready = (conditions.get("Ready") or {}).get("status") == "True"
    results = {}
    for ctype in condition_types:
        cond = conditions.get(ctype)
        if cond is None:
            continue
        heartbeat = cond.get("lastHeartbeatTime")
        results[ctype] = NodeResult(
            status=str(cond.get("status", "Unknown")),
            reason=str(cond.get("reason", "")),
            message=str(cond.get("message", "")),
            heartbeat=meta.parse_time(heartbeat) if heartbeat else None,
        )
    return NodeView(str(node["metadata"]["name"]), ready, results)
