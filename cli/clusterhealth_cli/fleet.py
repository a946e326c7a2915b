"""``clusterhealth status``: the whole fleet on one screen, from objects already read.

Pure: the lists of Clusters, MultiClusterIngresses, bindings and Leases in,
one row per Cluster (Ready, DNS, remedy actions, taints, the MCIs blocking its
traffic, evictions away from it, the storm guard) and the control plane's
leaders out; :mod:`clusterhealth_cli.live` reads them, :mod:`.app` prints.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from clusterhealth_cli import explain

DNS = "ServiceDomainNameResolutionReady"
LEASE_PREFIX = "clusterhealth-"
"""The components' Leases are named ``clusterhealth-<component>`` (their default)."""


@dataclasses.dataclass(frozen=True)
class ClusterRow:
    """One Cluster, as ``status`` shows it."""

    name: str
    ready: str
    dns: str
    remedy_actions: tuple[str, ...]
    taints: tuple[str, ...]
    blocked_by: tuple[str, ...]
    evictions: int
    """Graceful-eviction tasks away from this Cluster (workloads still leaving)."""
    storm_guard: str | None


@dataclasses.dataclass(frozen=True)
class Leader:
    """Who holds one component's Lease, and how fresh it is."""

    lease: str
    holder: str
    renewed: str


@dataclasses.dataclass(frozen=True)
class Fleet:
    """Everything ``status`` prints."""

    clusters: tuple[ClusterRow, ...]
    leaders: tuple[Leader, ...]
    notes: tuple[str, ...] = ()


def _status_of(obj: Mapping[str, Any], ctype: str) -> str:
    return explain.condition_statuses(obj).get(ctype, "-")


def _taint(raw: Mapping[str, Any]) -> str:
    key = str(raw.get("key") or "").removeprefix("cluster.karmada.io/")
    value = f"={raw['value']}" if raw.get("value") else ""
    return f"{key}{value}:{raw.get('effect')}"


def build(clusters: Sequence[Mapping[str, Any]], ingresses: Sequence[Mapping[str, Any]],
          bindings: Sequence[Mapping[str, Any]], leases: Sequence[Mapping[str, Any]],
          notes: Sequence[str] = ()) -> Fleet:
    """The fleet from the objects of a control plane."""
    rows = []
    for obj in sorted(clusters, key=lambda o: str(o["metadata"]["name"])):
        name = str(obj["metadata"]["name"])
        status = obj.get("status") or {}
        evicting = sum(1 for binding in bindings
                       for task in ((binding.get("spec") or {}).get("gracefulEvictionTasks")
                                    or [])
                       if isinstance(task, Mapping) and task.get("fromCluster") == name)
        rows.append(ClusterRow(
            name=name, ready=_status_of(obj, "Ready"), dns=_status_of(obj, DNS),
            remedy_actions=tuple(status.get("remedyActions") or ()),
            taints=tuple(_taint(t) for t in (obj.get("spec") or {}).get("taints") or []
                         if isinstance(t, Mapping)),
            blocked_by=explain.blocked_by(name, ingresses), evictions=evicting,
            storm_guard=explain.storm_guard(obj)))
    leaders = []
    for lease in sorted(leases, key=lambda o: (o["metadata"].get("namespace", ""),
                                               o["metadata"]["name"])):
        meta = lease["metadata"]
        if not str(meta["name"]).startswith(LEASE_PREFIX):
            continue
        spec = lease.get("spec") or {}
        leaders.append(Leader(f"{meta.get('namespace')}/{meta['name']}",
                              str(spec.get("holderIdentity") or ""),
                              str(spec.get("renewTime") or "")))
    return Fleet(tuple(rows), tuple(leaders), tuple(notes))


def _cell(values: Sequence[str]) -> str:
    return ",".join(values) if values else "-"


def render_text(fleet: Fleet, now: datetime.datetime) -> str:
    """A table of Clusters, then the leaders and the notes."""
    header = ("CLUSTER", "READY", "DNS", "REMEDY-ACTIONS", "TAINTS", "BLOCKED-BY", "EVICTIONS")
    rows = [header] + [(r.name, r.ready, r.dns, _cell(r.remedy_actions), _cell(r.taints),
                        _cell(r.blocked_by), str(r.evictions)) for r in fleet.clusters]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
             .rstrip() for row in rows]
    if not fleet.clusters:
        lines.append("(no Cluster: join one with clusterhealth join)")
    guarded = [r for r in fleet.clusters if r.storm_guard is not None]
    for row in guarded:
        lines.append(f"storm guard holds evictions from {row.name}: {row.storm_guard}")
    lines.append("")
    lines.append("Leaders:")
    if not fleet.leaders:
        lines.append("  (no clusterhealth-* Lease: no controller runs, or leader election "
                     "is off)")
    for leader in fleet.leaders:
        renewed = explain.when(leader.renewed, now) if leader.renewed else "never renewed"
        lines.append(f"  {leader.lease}  {leader.holder or '(none)'}  renewed {renewed}")
    if fleet.notes:
        lines.append("")
        lines.append("Notes:")
        lines += [f"  {note}" for note in fleet.notes]
    return "\n".join(lines) + "\n"


def to_data(fleet: Fleet) -> Any:
    """Plain data (camelCase keys) for ``-o json`` and ``-o yaml``."""
    return explain.plain(fleet)


def to_json(fleet: Fleet) -> str:
    """``-o json``."""
    return json.dumps(to_data(fleet), indent=2) + "\n"


def to_yaml(data: Any) -> str:
    """``-o yaml`` of any plain data (``status``, ``explain``)."""
    return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
