"""What the cluster-status controller writes on a Cluster: pure, table-tested.

**Ready** (Karmada's ``cluster-status-controller`` semantics):

* a probe answered 200 -> True/``ClusterReady``; answered anything else
  (``/readyz`` 404 falls back to ``/healthz`` first) -> False/
  ``ClusterNotReady``; no answer within the probe timeout -> False/
  ``ClusterNotReachable``.  (Karmada reads any non-2xx answer as an error of
  its REST client and so reports a 500 as ``ClusterNotReachable``; here an
  answer is an answer: the member's API server is up but says it is not ok.)
* :func:`adjust` is Karmada's threshold adjustment: the condition flips
  between True and not-True only when the newly observed status has
  persisted for the success (to True) or failure (to not True) threshold;
  until then the current condition is kept.  False to False with another
  reason, and Unknown to False, are written at once.  Beyond Karmada, a
  controller that starts (a new term of leadership) and finds a Ready
  condition already written counts the threshold from its first probe,
  instead of writing its first observation at once.
* :func:`unknown` : no probe result at all for ``monitor_grace_period``
  (the member's client cannot even be built: Secret missing, no endpoint)
  -> Unknown/``ClusterStatusUnknown`` (``ClusterStatusNeverUpdated`` when no
  Ready was ever written).  Karmada writes False/``StatusCollectionFailed``
  at once in that case; waiting for the grace period keeps a Secret being
  rotated from tainting the cluster.
* Pull clusters are probed by their agent, which writes Ready itself and
  renews the Lease ``karmada-cluster/<cluster>``.  As Karmada's cluster
  controller, the control plane only watches that heartbeat (the Lease's
  ``renewTime``, or any change of the Ready condition): none for the grace
  period -> Unknown (:func:`pull_unknown`).

**The other fields**, refreshed only while Ready is True (otherwise the last
values stay, as in Karmada): ``kubernetesVersion``, ``apiEnablements``
(every served groupVersion with its resources' name and kind, subresources
left out, sorted) with the ``CompleteAPIEnablements`` condition,
``nodeSummary`` and ``resourceSummary``: ``allocatable`` summed over the
Nodes, ``allocated`` the requests of the Pods bound to a Node and not
finished, ``allocating`` those of the Pods not bound yet (each Pod's
request is Kubernetes' effective request: the containers' sum, at least the
largest init container's, plus the overhead), and ``pods`` counted in both.
The scheduler's available replicas are ``allocatable - allocated -
allocating`` of these (``scheduler.adapt.free_resources``).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import fractions
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clusterhealth_controlplane import options, quantities, vocabulary, wiretime

READY = "Ready"
COMPLETE_API_ENABLEMENTS = "CompleteAPIEnablements"
TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"

CLUSTER_READY = "ClusterReady"
CLUSTER_READY_MESSAGE = "cluster is healthy and ready to accept workloads"
CLUSTER_NOT_READY = "ClusterNotReady"
CLUSTER_NOT_READY_MESSAGE = "cluster is reachable but health endpoint responded without ok"
CLUSTER_NOT_REACHABLE = "ClusterNotReachable"
CLUSTER_NOT_REACHABLE_MESSAGE = "cluster is not reachable"
STATUS_UNKNOWN = "ClusterStatusUnknown"
NEVER_UPDATED = "ClusterStatusNeverUpdated"
PULL_UNKNOWN_MESSAGE = "Cluster status controller stopped posting cluster status."
PULL_NEVER_MESSAGE = "Cluster status controller never posted cluster status."

APIS_COMPLETE = "Complete"
APIS_PARTIAL = "Partial"
APIS_EMPTY = "Empty"

OWN_FIELDS = ("kubernetesVersion", "apiEnablements", "nodeSummary", "resourceSummary")
"""The status fields the controller owns besides its conditions."""
OWN_CONDITIONS = (READY, COMPLETE_API_ENABLEMENTS)

CPU, MEMORY, PODS = "cpu", "memory", "pods"


class Outcome(enum.StrEnum):
    """One probe's result (also the ``result`` label of the probe counter)."""

    OK = "ok"
    NOT_OK = "not_ok"
    UNREACHABLE = "unreachable"


@dataclasses.dataclass(frozen=True)
class Observation:
    """A Ready condition without its time: what a probe (or the lack of one) says."""

    status: str
    reason: str
    message: str


def observed(outcome: Outcome, detail: str = "") -> Observation:
    """The Ready condition a probe result stands for (``detail`` appended to the message)."""
    if outcome is Outcome.OK:
        return Observation(TRUE, CLUSTER_READY, CLUSTER_READY_MESSAGE)
    if outcome is Outcome.NOT_OK:
        base = Observation(FALSE, CLUSTER_NOT_READY, CLUSTER_NOT_READY_MESSAGE)
    else:
        base = Observation(FALSE, CLUSTER_NOT_REACHABLE, CLUSTER_NOT_REACHABLE_MESSAGE)
    return dataclasses.replace(base, message=f"{base.message}: {detail}") if detail else base


def of_condition(condition: Mapping[str, Any] | None) -> Observation | None:
    """A written condition as an :class:`Observation` (None if absent)."""
    if condition is None:
        return None
    return Observation(str(condition.get("status", UNKNOWN)), str(condition.get("reason", "")),
                       str(condition.get("message", "")))


MIN_RECHECK = 0.01
"""Seconds: the soonest a probe is repeated (a flip due now is probed again at once)."""


@dataclasses.dataclass(frozen=True)
class Memory:
    """What the controller remembers of one member between probes (never written)."""

    first_seen: float
    """When this term first reconciled the Cluster (monotonic seconds)."""
    observed_status: str | None = None
    """The status of the last probe result."""
    since: float = 0.0
    """When the probe results turned to ``observed_status``."""
    last_result: float | None = None
    """When the last probe result came in (None: none yet this term)."""
    heartbeat: float | None = None
    """Pull clusters: when the agent's heartbeat last moved."""
    lease_renewed: str | None = None
    """Pull clusters: the Lease ``renewTime`` last seen."""
    ready_seen: Observation | None = None
    """Pull clusters: the Ready condition last seen."""


def adjust(memory: Memory, seen: Observation, current: Observation | None, now: float,
           health: options.ClusterHealth) -> tuple[Memory, Observation]:
    """Karmada's threshold adjustment: the Ready to write after a probe saw ``seen``.

    ``current`` is the Ready condition on the Cluster now.  Returns the new
    memory and the condition to write (``current`` itself while a flip waits
    for its threshold).
    """
    if memory.observed_status != seen.status:
        memory = dataclasses.replace(memory, observed_status=seen.status, since=now)
    memory = dataclasses.replace(memory, last_result=now)
    if current is None:
        return memory, seen  # just joined: the first result is written at once
    flips = (seen.status == TRUE) != (current.status == TRUE)
    threshold = health.success_threshold if seen.status == TRUE else health.failure_threshold
    if flips and now < memory.since + threshold:
        return memory, current
    return memory, seen


def recheck_after(memory: Memory, written: Observation, now: float,
                  health: options.ClusterHealth) -> float:
    """Seconds until the next probe: the update frequency, or sooner if a flip falls due.

    While the probe results differ from the written Ready (a flip waiting for its
    threshold), the next probe comes when the threshold is reached rather than
    up to one period later, so Ready changes at ``since + threshold``.
    """
    if memory.observed_status is None or (
            (memory.observed_status == TRUE) == (written.status == TRUE)):
        return health.update_frequency
    threshold = (health.success_threshold if memory.observed_status == TRUE
                 else health.failure_threshold)
    due = memory.since + threshold - now
    return min(health.update_frequency, max(due, MIN_RECHECK))


def unknown(memory: Memory, current: Observation | None, now: float,
            health: options.ClusterHealth, why: str) -> Observation | None:
    """Ready Unknown once no probe result came for the grace period (None: not yet).

    The grace period counts from the last result, or from when this term
    first saw the Cluster.
    """
    since = memory.last_result if memory.last_result is not None else memory.first_seen
    if now < since + health.monitor_grace_period:
        return None
    if current is not None and current.status == UNKNOWN:
        return current
    reason = NEVER_UPDATED if current is None else STATUS_UNKNOWN
    return Observation(UNKNOWN, reason,
                       f"no health probe result for {health.monitor_grace_period:g}s: {why}")


def heartbeat(memory: Memory, lease_renewed: str | None, ready: Observation | None,
              now: float) -> Memory:
    """Pull clusters: the memory after seeing the Lease and the Ready condition now."""
    if memory.heartbeat is None or lease_renewed != memory.lease_renewed \
            or ready != memory.ready_seen:
        return dataclasses.replace(memory, heartbeat=now, lease_renewed=lease_renewed,
                                   ready_seen=ready)
    return memory


def pull_unknown(memory: Memory, current: Observation | None, now: float,
                 health: options.ClusterHealth) -> Observation | None:
    """Pull clusters: Ready Unknown once the heartbeat stood still for the grace period."""
    beat = memory.heartbeat if memory.heartbeat is not None else memory.first_seen
    if now < beat + health.monitor_grace_period:
        return None
    if current is None:
        return Observation(UNKNOWN, NEVER_UPDATED, PULL_NEVER_MESSAGE)
    if current.status == UNKNOWN:
        return None
    return Observation(UNKNOWN, STATUS_UNKNOWN, PULL_UNKNOWN_MESSAGE)


def pull_recheck(memory: Memory, now: float, health: options.ClusterHealth) -> float:
    """Seconds until a Pull cluster's heartbeat should be looked at again."""
    beat = memory.heartbeat if memory.heartbeat is not None else memory.first_seen
    due = beat + health.monitor_grace_period - now
    return max(0.5, min(health.update_frequency, due)) if due > 0 \
        else health.update_frequency


# --- conditions ---------------------------------------------------------------------------

def find(conditions: Iterable[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    """The condition of type ``kind``, if any."""
    for condition in conditions:
        if condition.get("type") == kind:
            return condition
    return None


def condition(kind: str, wanted: Observation, current: Mapping[str, Any] | None,
              now: datetime.datetime) -> dict[str, Any]:
    """The condition as written: ``lastTransitionTime`` kept while the status is unchanged."""
    return vocabulary.keep_transition(
        {"type": kind, "status": wanted.status, "reason": wanted.reason,
         "message": wanted.message, "lastTransitionTime": wiretime.format_time(now)},
        [] if current is None else [current])


def api_condition(enablements: Sequence[Mapping[str, Any]], partial: bool) -> Observation:
    """``CompleteAPIEnablements``: True/Complete, False/Partial, or False/Empty."""
    if not enablements:
        return Observation(FALSE, APIS_EMPTY, "collected empty APIEnablements from the cluster")
    if partial:
        return Observation(FALSE, APIS_PARTIAL, "might collect partial APIEnablements"
                           f"({len(enablements)}) from the cluster")
    return Observation(TRUE, APIS_COMPLETE, "collected complete APIEnablements from the cluster")


# --- served APIs --------------------------------------------------------------------------

def _enablement(group_version: str, resources: Iterable[tuple[str, str]]) -> dict[str, Any]:
    listed = sorted({(name, kind) for name, kind in resources if name and "/" not in name})
    return {"groupVersion": group_version,
            "resources": [{"name": name, "kind": kind} for name, kind in listed]}


def aggregated_enablements(documents: Iterable[Mapping[str, Any]]
                           ) -> tuple[list[dict[str, Any]], bool]:
    """``apiEnablements`` from aggregated discovery (``APIGroupDiscoveryList`` of /api, /apis).

    Returns the sorted enablements and whether some version was reported stale
    (an aggregated API server that did not answer: the list may be partial).
    """
    found: dict[str, dict[str, Any]] = {}
    partial = False
    for document in documents:
        for group in document.get("items") or []:
            name = str((group.get("metadata") or {}).get("name") or "")
            for version in group.get("versions") or []:
                if version.get("freshness") == "Stale":
                    partial = True
                group_version = f"{name}/{version['version']}" if name \
                    else str(version["version"])
                found[group_version] = _enablement(group_version, (
                    (str(r.get("resource") or ""), str((r.get("responseKind") or {}).get(
                        "kind") or "")) for r in version.get("resources") or []))
    return [found[gv] for gv in sorted(found)], partial


def merged_enablements(parts: Iterable[tuple[Sequence[dict[str, Any]], bool]]
                       ) -> tuple[list[dict[str, Any]], bool]:
    """One sorted ``apiEnablements`` from :func:`aggregated_enablements` of each document.

    The same as :func:`aggregated_enablements` of all the documents at once (a
    later document's groupVersion wins), so a document that did not change
    (``304``) is not parsed again; partial when any part was.
    """
    found: dict[str, dict[str, Any]] = {}
    partial = False
    for enablements, stale in parts:
        found.update((str(e["groupVersion"]), e) for e in enablements)
        partial = partial or stale
    return [found[gv] for gv in sorted(found)], partial


def legacy_enablement(listing: Mapping[str, Any]) -> dict[str, Any]:
    """One ``APIResourceList`` (``/api/v1``, ``/apis/<group>/<version>``) as an enablement."""
    return _enablement(str(listing.get("groupVersion") or ""), (
        (str(r.get("name") or ""), str(r.get("kind") or ""))
        for r in listing.get("resources") or []))


def is_aggregated(document: Any) -> bool:
    """Whether a discovery answer is the aggregated kind (else: the legacy documents)."""
    return isinstance(document, Mapping) and document.get("kind") == "APIGroupDiscoveryList"


def legacy_group_versions(core: Mapping[str, Any], groups: Mapping[str, Any]) -> list[str]:
    """Every groupVersion a legacy ``/api`` + ``/apis`` pair lists."""
    versions = [str(v) for v in core.get("versions") or []]
    for group in groups.get("groups") or []:
        versions += [str(v["groupVersion"]) for v in group.get("versions") or []
                     if v.get("groupVersion")]
    return versions


# --- quantities, nodes and pods -----------------------------------------------------------

def _units(name: str, amount: fractions.Fraction) -> int:
    """Karmada's integer units: milli-CPU, and whole units of everything else (rounded up)."""
    return math.ceil(amount * 1000) if name == CPU else math.ceil(amount)


def _quantities(raw: Mapping[str, Any] | None) -> dict[str, int]:
    parsed: dict[str, int] = {}
    for name, value in (raw or {}).items():
        try:
            parsed[str(name)] = _units(str(name), quantities.parse(value))
        except ValueError:
            continue  # the API server validates quantities; skip what we cannot read
    return parsed


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def pod_request(spec: Mapping[str, Any]) -> dict[str, int]:
    """A Pod's effective request: containers summed, max'd with each init container, + overhead.

    In :func:`_units` (milli-CPU), so summing thousands of Pods is integer additions.
    """
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        _add(total, _quantities((container.get("resources") or {}).get("requests")))
    for container in spec.get("initContainers") or []:
        for name, amount in _quantities(
                (container.get("resources") or {}).get("requests")).items():
            total[name] = max(total.get(name, 0), amount)
    _add(total, _quantities(spec.get("overhead")))
    return total


def _identity(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}


def pod_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The informer transform of member Pods: identity, node, phase and effective request."""
    spec = obj.get("spec") or {}
    return {"metadata": _identity(obj), "nodeName": spec.get("nodeName") or "",
            "phase": (obj.get("status") or {}).get("phase") or "",
            "request": pod_request(spec)}


def node_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The informer transform of member Nodes: identity, allocatable and readiness."""
    status = obj.get("status") or {}
    ready = find(status.get("conditions") or [], READY)
    return {"metadata": _identity(obj), "allocatable": _quantities(status.get("allocatable")),
            "ready": ready is not None and ready.get("status") == TRUE}


def node_summary(nodes: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``nodeSummary``: Nodes in total and Ready (from :func:`node_fields` objects)."""
    listed = list(nodes)
    return {"totalNum": len(listed), "readyNum": sum(1 for n in listed if n.get("ready"))}


def _written(total: Mapping[str, int]) -> dict[str, str]:
    return {name: quantities.format_for(name, fractions.Fraction(
        total[name], 1000 if name == CPU else 1)) for name in sorted(total)}


def resource_summary(nodes: Iterable[Mapping[str, Any]],
                     pods: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """``resourceSummary`` from :func:`node_fields` Nodes and :func:`pod_fields` Pods."""
    allocatable: dict[str, int] = {}
    for node in nodes:
        _add(allocatable, node.get("allocatable") or {})
    allocated = {CPU: 0, MEMORY: 0, PODS: 0}
    allocating = dict(allocated)
    for pod in pods:
        if pod.get("phase") in ("Succeeded", "Failed"):
            continue  # the member's scheduler no longer counts them either
        into = allocated if pod.get("nodeName") else allocating
        _add(into, pod.get("request") or {})
        into[PODS] += 1
    return {"allocatable": _written(allocatable), "allocated": _written(allocated),
            "allocating": _written(allocating)}


# --- the write ----------------------------------------------------------------------------

def own_status(status: Mapping[str, Any]) -> dict[str, Any]:
    """The controller's fields of a Cluster's status (conditions: its own types only)."""
    mine: dict[str, Any] = {k: status[k] for k in OWN_FIELDS if status.get(k) not in (None, "")}
    conditions = [c for c in status.get("conditions") or [] if c.get("type") in OWN_CONDITIONS]
    if conditions:
        mine["conditions"] = sorted(conditions, key=lambda c: str(c.get("type")))
    return mine


def desired_status(status: Mapping[str, Any], ready: dict[str, Any],
                   refreshed: Mapping[str, Any]) -> dict[str, Any]:
    """The controller's fields as they should be: the ``refreshed`` ones, the others kept.

    ``refreshed`` holds the fields collected this time (any of
    :data:`OWN_FIELDS`, and ``conditions`` with ``CompleteAPIEnablements``);
    the fields not collected keep their current value (the controller applies
    all of its fields every time, or the server would drop those left out).
    """
    wanted = own_status(status)
    wanted.update({k: v for k, v in refreshed.items() if k != "conditions"})
    conditions = {str(c["type"]): c for c in wanted.get("conditions") or []}
    for extra in refreshed.get("conditions") or []:
        conditions[str(extra["type"])] = extra
    conditions[READY] = ready
    wanted["conditions"] = [conditions[k] for k in sorted(conditions)]
    return wanted


def differs(status: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether writing ``wanted`` would change the Cluster (so a write is needed)."""
    return own_status(status) != own_status(wanted)
