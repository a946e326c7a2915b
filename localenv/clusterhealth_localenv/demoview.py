"""What ``make demo`` shows, as pure functions of plain data.

The demo (:mod:`clusterhealth_localenv.demo`) reads the API servers, HAProxy
and the load generator; this module turns what it read into the lines a
person sees: a Cluster's changes, the traffic counter line, HAProxy's
servers per cluster, and the closing summary.  Nothing here does I/O, so the
text is tested with tables (``tests/test_demo_view.py``).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import ipaddress
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

DNS_CONDITION = "ServiceDomainNameResolutionReady"
SLOT_PREFIX = "mci_slot_"
"""The MCI provider's HAProxy backends (docs/mci-haproxy.md)."""


# --- Clusters -----------------------------------------------------------------------


def cluster_view(cluster: Mapping[str, Any]) -> dict[str, str]:
    """What a person follows of a Cluster: conditions (status, reason), actions, taints.

    Messages and heartbeats change too often to print each time.
    """
    st = cluster.get("status") or {}
    view = {f"condition {c['type']}": f"{c.get('status')} ({c.get('reason') or '-'})"
            for c in st.get("conditions") or []}
    view["remedyActions"] = ",".join(st.get("remedyActions") or []) or "-"
    taints = (cluster.get("spec") or {}).get("taints") or []
    view["taints"] = ",".join(f"{t['key']}:{t['effect']}" for t in taints) or "-"
    return view


def cluster_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """One line per field of :func:`cluster_view` that changed, in a stable order."""
    lines = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key, "absent"), after.get(key, "absent")
        if old != new:
            lines.append(f"{key}: {old} -> {new}")
    return lines


def condition_status(cluster: Mapping[str, Any], kind: str) -> str | None:
    """The status of condition ``kind`` of a Cluster, if reported."""
    for cond in (cluster.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return str(cond.get("status"))
    return None


def taint_effects(cluster: Mapping[str, Any], key: str) -> set[str]:
    """The effects of the Cluster's taints with ``key``."""
    return {str(t.get("effect")) for t in (cluster.get("spec") or {}).get("taints") or []
            if t.get("key") == key}


def deployment_settled(obj: Mapping[str, Any] | None) -> int | None:
    """A member Deployment's replicas once all are available and nothing else runs.

    None without a Deployment, -1 while it has not settled.
    """
    if obj is None:
        return None
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    wanted = int(spec.get("replicas") or 0)
    settled = (status.get("observedGeneration") == (obj.get("metadata") or {}).get("generation")
               and status.get("availableReplicas", 0) == wanted
               and status.get("replicas", 0) == wanted)
    return wanted if settled else -1


# --- HAProxy ------------------------------------------------------------------------


def parse_stat(text: str) -> list[dict[str, str]]:
    """Rows of HAProxy's ``show stat`` CSV (the header line starts with ``# ``)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("# "):
        return []
    lines[0] = lines[0][2:]
    return [dict(row) for row in csv.DictReader(io.StringIO("\n".join(lines)))]


def cluster_of(address: str, pod_ranges: Mapping[str, str]) -> str | None:
    """The member whose Pod range (a CIDR) holds ``address`` (``ip`` or ``ip:port``)."""
    try:
        ip = ipaddress.ip_address(address.rsplit(":", 1)[0] if address.count(":") == 1
                                  else address)
    except ValueError:
        return None
    for cluster, cidr in pod_ranges.items():
        if ip in ipaddress.ip_network(cidr):
            return cluster
    return None


def server_state(status: str) -> str:
    """HAProxy's server status in one word: ``up``, ``draining``, ``maint``, ``down``.

    ``up`` is ``no check`` (a server without health checks that takes traffic) or ``UP``.
    """
    word = status.strip().upper()
    if word.startswith("DRAIN"):
        return "draining"
    if word.startswith("MAINT"):
        return "maint"
    if word == "NO CHECK" or word.startswith("UP"):
        return "up"
    return word.lower().split(" ")[0] or "?"


def servers_by_cluster(rows: Iterable[Mapping[str, str]], pod_ranges: Mapping[str, str]
                       ) -> dict[str, Counter[str]]:
    """Per member, its Pods' servers by :func:`server_state`, over the MCI provider's slots."""
    found: dict[str, Counter[str]] = {c: Counter() for c in pod_ranges}
    for row in rows:
        if not row.get("pxname", "").startswith(SLOT_PREFIX):
            continue
        if row.get("svname") in ("FRONTEND", "BACKEND"):
            continue
        cluster = cluster_of(row.get("addr", ""), pod_ranges)
        if cluster is not None:
            found[cluster][server_state(row.get("status", ""))] += 1
    return found


def taking_traffic(states: Mapping[str, Counter[str]], cluster: str) -> int:
    """How many of ``cluster``'s servers HAProxy sends new requests to."""
    return states.get(cluster, Counter())["up"]


def haproxy_line(states: Mapping[str, Counter[str]]) -> str:
    """``member1 1 up, member2 2 up + 1 draining`` (servers in maintenance are not shown)."""
    parts = []
    for cluster, counts in states.items():
        text = f"{cluster} {counts['up']} up"
        if counts["draining"]:
            text += f" + {counts['draining']} draining"
        parts.append(text)
    return ", ".join(parts)


def retries(rows: Iterable[Mapping[str, str]]) -> tuple[int, int]:
    """HAProxy's connection retries and redispatches over the MCI slots' backends."""
    retried = redispatched = 0
    for row in rows:
        if row.get("pxname", "").startswith(SLOT_PREFIX) and row.get("svname") == "BACKEND":
            retried += int(row.get("wretr") or 0)
            redispatched += int(row.get("wredis") or 0)
    return retried, redispatched


# --- traffic ------------------------------------------------------------------------


def cluster_of_backend(backend: str) -> str:
    """The member of a Pod server's answer (``<member>/<pod>``)."""
    return backend.split("/", 1)[0]


def answers_by_cluster(answers: Iterable[tuple[float, str]], clusters: Sequence[str]
                       ) -> dict[str, int]:
    """How many answers each member gave (every member listed, 0 included)."""
    counts = dict.fromkeys(clusters, 0)
    for _, backend in answers:
        cluster = cluster_of_backend(backend)
        counts[cluster] = counts.get(cluster, 0) + 1
    return counts


def traffic_line(window: float, recent: Mapping[str, int], recent_failed: int,
                 answered: int, failed: int, haproxy: str) -> str:
    """The counter line: answers per member and failures lately, totals, HAProxy's servers."""
    per = "  ".join(f"{cluster} {count:>4}" for cluster, count in recent.items())
    return (f"traffic, last {window:g} s: {per}  failed {recent_failed}"
            f" | total {answered} answered, {failed} failed | HAProxy: {haproxy}")


# --- phases and summary --------------------------------------------------------------


@dataclasses.dataclass
class Phase:
    """One scripted phase: when it ran, what happened when, and the traffic meanwhile."""

    number: int
    title: str
    began: float
    """Monotonic seconds."""
    ended: float | None = None
    milestones: list[tuple[float, str]] = dataclasses.field(default_factory=list)
    """(seconds since ``began``, what happened)."""
    answered: dict[str, int] = dataclasses.field(default_factory=dict)
    failed: list[str] = dataclasses.field(default_factory=list)

    def mark(self, now: float, what: str) -> float:
        """Record a milestone; return its time since the phase began."""
        self.milestones.append((now - self.began, what))
        return now - self.began

    @property
    def seconds(self) -> float | None:
        """How long the phase took (None while it runs)."""
        return None if self.ended is None else self.ended - self.began


def phase_line(phase: Phase) -> str:
    """``phase 1 (DNS failure): 21.3 s, 1234 answered (member1 300, member2 934), 0 failed``."""
    took = "interrupted" if phase.seconds is None else f"{phase.seconds:.1f} s"
    total = sum(phase.answered.values())
    per = ", ".join(f"{c} {n}" for c, n in phase.answered.items())
    return (f"phase {phase.number} ({phase.title}): {took}, {total} answered ({per}), "
            f"{len(phase.failed)} failed")


def summary_lines(phases: Sequence[Phase], answered: int, failed: Sequence[str],
                  retries_seen: tuple[int, int], logs: str,
                  logs_are: str = "one file per process") -> list[str]:
    """The closing summary: each phase with its timeline, the whole run, the logs."""
    lines = ["summary"]
    for phase in phases:
        lines.append("  " + phase_line(phase))
        for at, what in phase.milestones:
            lines.append(f"      {at:6.1f} s  {what}")
        for failure in phase.failed[:5]:
            lines.append(f"      failed: {failure}")
    lines.append(f"  all traffic: {answered} answered, {len(failed)} failed; HAProxy retried "
                 f"{retries_seen[0]} connections, redispatched {retries_seen[1]}")
    lines.append(f"  logs: {logs} ({logs_are})")
    return lines


def flag_lines(flags: Sequence[str]) -> list[str]:
    """``--flag value`` pairs, one per line, for printing a command's shortened timers."""
    lines: list[str] = []
    for item in flags:
        if item.startswith("--") or not lines:
            lines.append(item)
        else:
            lines[-1] += f" {item}"
    return lines
