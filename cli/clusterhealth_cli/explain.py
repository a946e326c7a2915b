"""``clusterhealth explain cluster``: what the system thinks of one Cluster, and why. Pure.

The objects are read elsewhere (:mod:`.live`) into a :class:`Snapshot`; here
they become an :class:`Explanation` (which is also the ``-o json`` output) and
text.  The rules are the components' own pure decision modules, never a copy:

* conditions and who wrote them: ``metadata.managedFields`` (the managers
  owning each condition's ``k:{"type":...}`` entry, or the whole list where
  the API declares it atomic, as Karmada's Cluster API does);
* Remedies: :mod:`clusterhealth_remedy.decision` (``decide``,
  ``status_patch``) and :mod:`.verdicts` for the reasons;
* when bindings leave a NoExecute-tainted cluster:
  :mod:`clusterhealth_controlplane.taintmanager.decision` (``no_execute_taints``,
  ``tolerations``, ``verdict``);
* when a graceful-eviction task ends at the latest:
  :mod:`clusterhealth_controlplane.gracefuleviction.decision` (``deadline``).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any

from clusterhealth_cli import verdicts
from clusterhealth_controlplane.gracefuleviction import decision as eviction_decision
from clusterhealth_controlplane.taintmanager import decision as taint_decision
from clusterhealth_core.api import meta, remedy
from clusterhealth_remedy import decision as remedy_decision

NO_EXECUTE = taint_decision.NO_EXECUTE
STORM_GUARD = taint_decision.CONDITION
WHOLE_LIST = "the whole conditions list"
"""What a manager owns on an atomic conditions list (Karmada's Cluster API)."""


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """What was read from the control plane (None: that kind could not be read)."""

    cluster: Mapping[str, Any]
    remedies: Sequence[Mapping[str, Any]] | None
    ingresses: Sequence[Mapping[str, Any]] | None
    bindings: Sequence[Mapping[str, Any]] | None
    """ResourceBindings and ClusterResourceBindings (each with its ``kind``)."""
    notes: tuple[str, ...] = ()
    """What could not be read, and why."""


@dataclasses.dataclass(frozen=True)
class Writer:
    """A field manager that owns (part of) a condition."""

    manager: str
    operation: str
    subresource: str
    time: str
    fields: tuple[str, ...]
    """The condition's fields it owns, or :data:`WHOLE_LIST`."""


@dataclasses.dataclass(frozen=True)
class ConditionView:
    """One condition of the Cluster and its writers."""

    type: str
    status: str
    reason: str
    message: str
    last_transition_time: str
    writers: tuple[Writer, ...]


@dataclasses.dataclass(frozen=True)
class TaintView:
    """One taint of the Cluster."""

    key: str
    value: str
    effect: str
    time_added: str
    standing: bool
    """False for a not-ready/unreachable NoExecute taint on a Ready Cluster (being removed)."""


@dataclasses.dataclass(frozen=True)
class BindingOutlook:
    """A binding scheduled to the Cluster, and when a NoExecute taint makes it leave."""

    kind: str
    namespace: str
    name: str
    evict_at: str | None
    """RFC 3339; None: it stays (tolerated for ever)."""
    immediately: bool
    """A NoExecute taint it does not tolerate: evicted as soon as the taint manager acts."""
    why: str


@dataclasses.dataclass(frozen=True)
class EvictionView:
    """A graceful-eviction task away from the Cluster."""

    kind: str
    namespace: str
    name: str
    reason: str
    producer: str
    message: str
    purge_mode: str
    created: str
    suppress_deletion: bool | None
    ends_at: str | None
    """When the task ends at the latest (None: not stamped yet, or kept by the user)."""
    ends_why: str


@dataclasses.dataclass(frozen=True)
class Explanation:
    """Everything ``explain cluster`` says (the ``-o json`` document)."""

    cluster: str
    now: str
    conditions: tuple[ConditionView, ...]
    remedy_actions: tuple[str, ...]
    """As on the Cluster's status."""
    remedy_action_sources: Mapping[str, tuple[str, ...]]
    """As on the Cluster's status (action to Remedies)."""
    computed_remedy_actions: tuple[str, ...] | None
    """What the remedy controller's decision gives now (None: Remedies not readable)."""
    computed_remedy_action_sources: Mapping[str, tuple[str, ...]] | None
    remedies: tuple[verdicts.Verdict, ...]
    """Every readable Remedy against this Cluster, sorted by name."""
    malformed_remedies: tuple[str, ...]
    """Remedies the controller ignores (``name: reason``)."""
    taints: tuple[TaintView, ...]
    storm_guard: str | None
    """The storm guard's message while it holds evictions from this Cluster."""
    bindings: tuple[BindingOutlook, ...]
    """Bindings scheduled here, when the Cluster has a standing NoExecute taint."""
    scheduled_bindings: int | None
    """How many bindings are scheduled here (None: bindings not readable)."""
    blocked_by: tuple[str, ...]
    """``namespace/name`` of the MultiClusterIngresses blocking traffic to this Cluster."""
    evictions: tuple[EvictionView, ...]
    graceful_eviction_timeout: float
    notes: tuple[str, ...]


# --- building ---------------------------------------------------------------------------

def _str(value: Any) -> str:
    return "" if value is None else str(value)


def condition_writers(cluster_obj: Mapping[str, Any]) -> tuple[dict[str, list[Writer]],
                                                                   list[Writer]]:
    """From ``managedFields``: condition type to its writers, and owners of an atomic list."""
    per_type: dict[str, list[Writer]] = {}
    whole: list[Writer] = []
    for entry in (cluster_obj.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, Mapping):
            continue
        fields = ((entry.get("fieldsV1") or {}).get("f:status") or {}).get("f:conditions")
        if not isinstance(fields, Mapping):
            continue
        def writer(owned: tuple[str, ...], entry: Mapping[str, Any] = entry) -> Writer:
            return Writer(_str(entry.get("manager")), _str(entry.get("operation")),
                          _str(entry.get("subresource")), _str(entry.get("time")), owned)
        keys = [key for key in fields if isinstance(key, str) and key.startswith("k:")]
        if not keys:
            whole.append(writer((WHOLE_LIST,)))
            continue
        for key in keys:
            try:
                ctype = json.loads(key[2:]).get("type")
            except (ValueError, AttributeError):
                continue
            owned = fields[key] if isinstance(fields[key], Mapping) else {}
            names = tuple(sorted(f[2:] for f in owned if isinstance(f, str)
                                 and f.startswith("f:")))
            per_type.setdefault(str(ctype), []).append(writer(names))
    return per_type, whole


def _writer_order(writer: Writer) -> tuple[int, str]:
    return (0 if "status" in writer.fields or writer.fields == (WHOLE_LIST,) else 1,
            writer.manager)


def conditions(cluster_obj: Mapping[str, Any]) -> tuple[ConditionView, ...]:
    """The Cluster's conditions, each with the managers that wrote it."""
    per_type, whole = condition_writers(cluster_obj)
    views = []
    for raw in (cluster_obj.get("status") or {}).get("conditions") or []:
        if not isinstance(raw, Mapping):
            continue
        ctype = _str(raw.get("type"))
        writers = per_type.get(ctype) or whole
        views.append(ConditionView(
            ctype, _str(raw.get("status")), _str(raw.get("reason")), _str(raw.get("message")),
            _str(raw.get("lastTransitionTime")), tuple(sorted(writers, key=_writer_order))))
    return tuple(views)


def condition_statuses(cluster_obj: Mapping[str, Any]) -> dict[str, str]:
    """``type -> status``: the remedy decision's input."""
    return {_str(c.get("type")): _str(c.get("status"))
            for c in (cluster_obj.get("status") or {}).get("conditions") or []
            if isinstance(c, Mapping)}


def live_sources(cluster_obj: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """``status.remedyActionSources`` as action to Remedies."""
    return {_str(s.get("action")): tuple(_str(r) for r in s.get("remedies") or [])
            for s in (cluster_obj.get("status") or {}).get("remedyActionSources") or []
            if isinstance(s, Mapping)}


def parse_remedies(objs: Sequence[Mapping[str, Any]]
                   ) -> tuple[list[remedy.Remedy], list[str]]:
    """The Remedies as the controller reads them (lenient), and those it ignores."""
    parsed: list[remedy.Remedy] = []
    malformed: list[str] = []
    for obj in objs:
        try:
            parsed.append(remedy.Remedy.from_dict(obj))
        except meta.ValidationError as exc:
            malformed.append(f"{(obj.get('metadata') or {}).get('name')}: {exc}")
    return parsed, malformed


def taints(cluster_obj: Mapping[str, Any]) -> tuple[TaintView, ...]:
    """Every taint of the Cluster; ``standing`` as the taint manager counts NoExecute ones."""
    standing = {(t.key, t.value) for t in taint_decision.no_execute_taints(cluster_obj)}
    views = []
    for raw in (cluster_obj.get("spec") or {}).get("taints") or []:
        if not isinstance(raw, Mapping):
            continue
        key, value, effect = _str(raw.get("key")), _str(raw.get("value")), _str(raw.get("effect"))
        views.append(TaintView(key, value, effect, _str(raw.get("timeAdded")),
                               effect != NO_EXECUTE or (key, value) in standing))
    return tuple(views)


def storm_guard(cluster_obj: Mapping[str, Any]) -> str | None:
    """The storm guard's message while its condition is True on the Cluster."""
    for raw in (cluster_obj.get("status") or {}).get("conditions") or []:
        if isinstance(raw, Mapping) and raw.get("type") == STORM_GUARD:
            return _str(raw.get("message")) if raw.get("status") == "True" else None
    return None


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    metadata = obj.get("metadata") or {}
    return _str(obj.get("kind")), _str(metadata.get("namespace")), _str(metadata.get("name"))


def outlook(cluster_obj: Mapping[str, Any], bindings: Sequence[Mapping[str, Any]]
            ) -> tuple[BindingOutlook, ...]:
    """When each binding scheduled to the Cluster leaves it (the taint manager's rule)."""
    name = _str((cluster_obj.get("metadata") or {}).get("name"))
    standing = taint_decision.no_execute_taints(cluster_obj)
    if not standing:
        return ()
    found = []
    for binding in bindings:
        if name not in taint_decision.targets(binding):
            continue
        if (binding.get("metadata") or {}).get("deletionTimestamp"):
            continue  # the taint manager leaves a binding being deleted alone
        result = taint_decision.verdict(standing, taint_decision.tolerations(binding))
        immediately = result.evict_at == taint_decision.IMMEDIATELY
        at = (None if result.evict_at is None or immediately
              else taint_decision.format_time(result.evict_at))
        found.append(BindingOutlook(*_identity(binding), at, immediately, result.why))
    def order(b: BindingOutlook) -> tuple[int, str, str, str, str]:
        rank = 0 if b.immediately else 1 if b.evict_at is not None else 2
        return rank, b.evict_at or "", b.kind, b.namespace, b.name
    return tuple(sorted(found, key=order))


def evictions(cluster_name: str, bindings: Sequence[Mapping[str, Any]], timeout: float
              ) -> tuple[EvictionView, ...]:
    """The graceful-eviction tasks away from the Cluster, with when each ends at the latest."""
    found = []
    for binding in bindings:
        for task in eviction_decision.tasks(binding):
            if task.get("fromCluster") != cluster_name:
                continue
            suppress = task.get("suppressDeletion")
            limit = eviction_decision.deadline(task, timeout)
            if suppress is True:
                ends_at, why = None, "kept: suppressDeletion is true (a user holds the old copy)"
            elif suppress is False:
                ends_at, why = None, "ending now: suppressDeletion is false (confirmed)"
            elif limit is None:
                ends_at, why = None, "not stamped yet (the graceful-eviction controller stamps it)"
            else:
                ends_at = taint_decision.format_time(limit[0])
                why = (f"its gracePeriodSeconds, {task.get('gracePeriodSeconds')}s"
                       if limit[1] == eviction_decision.WHY_GRACE_PERIOD
                       else f"the controller's --graceful-eviction-timeout, taken as "
                            f"{timeout:g}s")
            found.append(EvictionView(
                *_identity(binding), _str(task.get("reason")), _str(task.get("producer")),
                _str(task.get("message")), _str(task.get("purgeMode")),
                _str(task.get("creationTimestamp")),
                suppress if isinstance(suppress, bool) else None, ends_at, why))
    return tuple(sorted(found, key=lambda e: (e.kind, e.namespace, e.name)))


def blocked_by(cluster_name: str, ingresses: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """``namespace/name`` of the MultiClusterIngresses whose trafficBlockClusters name it."""
    return tuple(sorted(
        f"{_identity(mci)[1]}/{_identity(mci)[2]}" for mci in ingresses
        if cluster_name in ((mci.get("status") or {}).get("trafficBlockClusters") or [])))


def build(snapshot: Snapshot, now: datetime.datetime,
          graceful_eviction_timeout: float) -> Explanation:
    """The explanation of ``snapshot.cluster`` at ``now``."""
    obj = snapshot.cluster
    name = _str((obj.get("metadata") or {}).get("name"))
    status = obj.get("status") or {}
    statuses = condition_statuses(obj)
    notes = list(snapshot.notes)
    computed: tuple[str, ...] | None = None
    computed_sources: dict[str, tuple[str, ...]] | None = None
    found: tuple[verdicts.Verdict, ...] = ()
    malformed: list[str] = []
    live_actions = tuple(_str(a) for a in status.get("remedyActions") or [])
    if snapshot.remedies is not None:
        parsed, malformed = parse_remedies(snapshot.remedies)
        result = remedy_decision.decide(name, statuses, parsed)
        computed, computed_sources = result.actions, dict(result.sources)
        found = tuple(verdicts.verdict(r, name, statuses)
                      for r in sorted(parsed, key=lambda r: r.metadata.name))
        if tuple(sorted(live_actions)) != computed:
            notes.append(
                f"the Remedies give remedyActions [{', '.join(computed)}] but the Cluster "
                f"holds [{', '.join(live_actions)}]: the remedy controller has not written "
                "it yet, is not running, or another writer set it")
    bindings = snapshot.bindings
    scheduled = (None if bindings is None else
                 sum(1 for b in bindings if name in taint_decision.targets(b)))
    return Explanation(
        cluster=name,
        now=taint_decision.format_time(now),
        conditions=conditions(obj),
        remedy_actions=live_actions,
        remedy_action_sources=live_sources(obj),
        computed_remedy_actions=computed,
        computed_remedy_action_sources=computed_sources,
        remedies=found,
        malformed_remedies=tuple(malformed),
        taints=taints(obj),
        storm_guard=storm_guard(obj),
        bindings=outlook(obj, bindings or ()),
        scheduled_bindings=scheduled,
        blocked_by=blocked_by(name, snapshot.ingresses or ()),
        evictions=evictions(name, bindings or (), graceful_eviction_timeout),
        graceful_eviction_timeout=graceful_eviction_timeout,
        notes=tuple(notes))


# --- output -----------------------------------------------------------------------------

def to_json(explanation: Explanation) -> str:
    """The explanation as an indented JSON document (field names in camelCase)."""
    return json.dumps(_plain(explanation), indent=2) + "\n"


def plain(value: Any) -> Any:
    """Dataclasses as plain data, for JSON and YAML output (camelCase field names)."""
    return _plain(value)


def _plain(value: Any) -> Any:
    """Dataclasses to dicts with camelCase field names; mappings keep their keys (names)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {_camel(field.name): _plain(getattr(value, field.name))
                for field in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def duration(seconds: float) -> str:
    """``45s``, ``4m10s``, ``2h3m``, ``3d4h``: short and exact enough for people."""
    total = int(abs(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


def when(moment: str, now: datetime.datetime) -> str:
    """``2026-01-01T00:00:00Z (3m ago)`` or ``(in 3m)``; the text as is when unreadable."""
    parsed = taint_decision.parse_time(moment)
    if parsed is None:
        return moment or "unknown time"
    delta = (parsed - now).total_seconds()
    if abs(delta) < 1:
        return f"{moment} (now)"
    return f"{moment} ({'in ' + duration(delta) if delta > 0 else duration(delta) + ' ago'})"


def _writer(writer: Writer) -> str:
    how = ", ".join(part for part in (writer.operation,
                                      f"{writer.subresource} subresource"
                                      if writer.subresource else "",
                                      writer.time) if part)
    owned = ""
    if writer.fields == (WHOLE_LIST,):
        owned = f"; owns {WHOLE_LIST} (atomic on this API)"
    elif "status" not in writer.fields:
        owned = f"; owns {', '.join(writer.fields) or 'the entry'} only"
    return f"{writer.manager or '(no manager)'} ({how}){owned}"


def _taint(taint: TaintView) -> str:
    text = f"{taint.key}={taint.value}" if taint.value else taint.key
    return f"{text}:{taint.effect}"


EFFECTS = {
    "NoSchedule": "new bindings are not scheduled here unless they tolerate it",
    "PreferNoSchedule": "the scheduler avoids this cluster when it can",
    NO_EXECUTE: ("bindings scheduled here that do not tolerate it are evicted; those "
                 "tolerating it for tolerationSeconds leave at timeAdded + tolerationSeconds"),
}


def render_text(e: Explanation, now: datetime.datetime) -> str:
    """The explanation for people."""
    out = [f"Cluster {e.cluster}  (as of {e.now})", ""]
    out.append("Conditions:")
    if not e.conditions:
        out.append("  none (a freshly joined cluster: only immediate Remedies act on it)")
    width = max((len(c.type) for c in e.conditions), default=0)
    for c in e.conditions:
        detail = f"  {c.reason}" if c.reason else ""
        out.append(f"  {c.type:<{width}}  {c.status:<7} since "
                   f"{when(c.last_transition_time, now)}{detail}")
        if c.message:
            out.append(f"  {'':<{width}}  message: {c.message}")
        if c.writers:
            out.append(f"  {'':<{width}}  written by {_writer(c.writers[0])}")
            out += [f"  {'':<{width}}  also owned by {_writer(w)}" for w in c.writers[1:]]
        else:
            out.append(f"  {'':<{width}}  written by: no field manager recorded")
    out += ["", "Remedy actions (status.remedyActions):"]
    if not e.remedy_actions:
        out.append("  none")
    for action in e.remedy_actions:
        sources = e.remedy_action_sources.get(action)
        by = (f"from Remedy {', '.join(sources)}" if sources else
              "no remedyActionSources recorded (written by Karmada's controller or an older one)")
        out.append(f"  {action}  {by}")
    out += ["", "Remedies:"]
    covering = [v for v in e.remedies if v.covers]
    if e.computed_remedy_actions is None:
        out.append("  not readable (see notes)")
    elif not e.remedies:
        out.append("  no Remedy exists")
    else:
        if not covering:
            out.append(f"  none of the {len(e.remedies)} Remedies covers {e.cluster}")
        for v in covering:
            out.append(f"  {v.remedy}: {v.why}")
        others = len(e.remedies) - len(covering)
        if covering and others:
            out.append(f"  (1 other Remedy does not cover {e.cluster})" if others == 1
                       else f"  ({others} other Remedies do not cover {e.cluster})")
    out += [f"  ignored by the controller (malformed): {m}" for m in e.malformed_remedies]
    out += ["", "Taints:"]
    if not e.taints:
        out.append("  none")
    for t in e.taints:
        added = f"  added {when(t.time_added, now)}" if t.time_added else ""
        out.append(f"  {_taint(t)}{added}")
        if not t.standing:
            out.append("    being removed: Ready is True again, so it evicts nothing")
        elif t.effect in EFFECTS:
            out.append(f"    {EFFECTS[t.effect]}")
    if e.storm_guard is not None:
        out.append(f"  evictions are held by the storm guard ({STORM_GUARD}): {e.storm_guard}")
    out += ["", "Bindings scheduled here and when they leave:"]
    if e.scheduled_bindings is None:
        out.append("  not readable (see notes)")
    elif not any(t.effect == NO_EXECUTE and t.standing for t in e.taints):
        out.append(f"  {e.scheduled_bindings} binding(s) scheduled here; no standing NoExecute "
                   "taint, so none is evicted")
    elif not e.bindings:
        out.append("  none scheduled here")
    for b in e.bindings:
        who = f"{b.namespace}/{b.name}" if b.namespace else b.name
        if b.immediately:
            at = "evicted as soon as the taint manager acts"
        elif b.evict_at is None:
            at = "stays"
        else:
            parsed = taint_decision.parse_time(b.evict_at)
            due = parsed is not None and parsed <= now
            at = f"{'due since' if due else 'evicted at'} {when(b.evict_at, now)}"
        out.append(f"  {who} ({b.kind}): {at}: {b.why}")
    out += ["", "Traffic (MultiClusterIngress status.trafficBlockClusters):"]
    out += ([f"  blocked by {name}" for name in e.blocked_by] if e.blocked_by
            else ["  no MultiClusterIngress blocks it"])
    out += ["", f"Evicted from {e.cluster} (graceful-eviction tasks):"]
    if not e.evictions:
        out.append("  none")
    for ev in e.evictions:
        who = f"{ev.namespace}/{ev.name}" if ev.namespace else ev.name
        by = f" by {ev.producer}" if ev.producer else ""
        created = f", created {when(ev.created, now)}" if ev.created else ""
        mode = f", purgeMode {ev.purge_mode}" if ev.purge_mode else ""
        out.append(f"  {who} ({ev.kind}): {ev.reason}{by}{created}{mode}")
        if ev.message:
            out.append(f"    message: {ev.message}")
        if ev.ends_at is not None:
            out.append(f"    the copy on {e.cluster} stays until the replacement is healthy, "
                       f"at the latest {when(ev.ends_at, now)}: {ev.ends_why}")
        else:
            out.append(f"    {ev.ends_why}")
    if e.notes:
        out += ["", "Notes:"]
        out += [f"  {note}" for note in e.notes]
    return "\n".join(out) + "\n"
