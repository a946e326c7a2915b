"""Member status as the control plane reports it: pure, table-tested.

Karmada's default interpreter, as v1.18.2 does it:

* **Reflect** (member object -> ``Work.status.manifestStatuses[].status``):
  the member object's status; for kinds with a ``metadata.generation`` also
  its ``generation`` and the ``resourceTemplateGeneration`` it was made from
  (the annotation the binding controller puts on the manifest), so the
  control plane can tell whether a member caught up with the latest template.
* **Health**: a Deployment is Healthy when its controller has observed the
  latest spec (``observedGeneration >= generation``) and every desired
  replica is updated and available; other kinds are Healthy when they exist.
* **Aggregate** (Works -> the binding's ``status.aggregatedStatus``): per
  cluster, the reflected status, whether the Work is applied (its
  ``Applied`` condition) with the message when not, and the health.
  ``FullyApplied`` is True when every target cluster has an applied Work.
  **Bounded**: one entry per cluster, always, but the messages share a budget
  (:func:`message_limit`: 2,048 characters each, less when many clusters
  fail, never under 128), and a longer one is cut saying so
  (``… (cut from 32768 characters)``), so a binding whose every cluster
  reports a long error stays far under etcd's 1.5 MiB per object.  Karmada
  copies each message whole, and such a binding's status write then fails.
* **Template status** (a Deployment's, in the control plane): the members'
  replica counts summed; ``observedGeneration`` becomes the template's
  generation once every member has observed the spec made from it.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from clusterhealth_controlplane import vocabulary, wiretime
from clusterhealth_core import text

APPLIED = vocabulary.APPLIED
FULLY_APPLIED = vocabulary.FULLY_APPLIED
FULLY_APPLIED_SUCCESS = "FullyAppliedSuccess"
FULLY_APPLIED_FAILED = "FullyAppliedFailed"
FULLY_APPLIED_SUCCESS_MESSAGE = "All works have been successfully applied"
FULLY_APPLIED_FAILED_MESSAGE = "Failed to apply all works, see status.aggregatedStatus for details"
TEMPLATE_GENERATION = "resourcetemplate.karmada.io/generation"

HEALTHY = vocabulary.HEALTHY
UNHEALTHY = vocabulary.UNHEALTHY
UNKNOWN = vocabulary.UNKNOWN

APPLIED_MESSAGE_LIMIT = 2048
"""Characters of one ``aggregatedStatus[].appliedMessage`` at most."""
APPLIED_MESSAGES_BUDGET = 128 * 1024
"""Characters the ``appliedMessage`` fields of one binding take at most (<= 512 KiB even in
four-byte characters): past 64 failing clusters, each gets its share of it."""
APPLIED_MESSAGE_FLOOR = 128
"""Characters a message keeps however many clusters fail (the start of an error says most)."""

DEPLOYMENT_COUNTS = ("replicas", "readyReplicas", "updatedReplicas", "availableReplicas",
                     "unavailableReplicas")


def _group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def is_deployment(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is an apps Deployment."""
    return _group_version(str(obj.get("apiVersion", "")))[0] == "apps" \
        and obj.get("kind") == "Deployment"


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def health(obj: Mapping[str, Any]) -> str:
    """Healthy or Unhealthy, for a member object that exists."""
    if not is_deployment(obj):
        return HEALTHY
    status = obj.get("status") or {}
    wanted = (obj.get("spec") or {}).get("replicas")
    wanted = 1 if wanted is None else _int(wanted)
    generation = _int((obj.get("metadata") or {}).get("generation"))
    if (_int(status.get("observedGeneration")) >= generation
            and _int(status.get("updatedReplicas")) == wanted
            and _int(status.get("availableReplicas")) == wanted):
        return HEALTHY
    return UNHEALTHY


def reflected_status(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The member object's status as the Work reports it (None: the object has none)."""
    status = obj.get("status")
    meta = obj.get("metadata") or {}
    if not isinstance(status, Mapping):
        status = None
    if meta.get("generation") is None:
        return dict(status) if status else None
    found = dict(status or {})
    found["generation"] = _int(meta.get("generation"))
    found["resourceTemplateGeneration"] = _int((meta.get("annotations") or {}).get(
        TEMPLATE_GENERATION))
    return found


def manifest_status(ordinal: int, group: str, version: str, kind: str, resource: str,
                    namespace: str | None, name: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """One ``manifestStatuses[]`` entry for a member object that exists."""
    identifier: dict[str, Any] = {"ordinal": ordinal, "group": group, "version": version,
                                  "kind": kind, "resource": resource, "name": name}
    if namespace:
        identifier["namespace"] = namespace
    entry: dict[str, Any] = {"identifier": identifier, "health": health(obj)}
    reflected = reflected_status(obj)
    if reflected is not None:
        entry["status"] = reflected
    return entry


def _condition(work: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for entry in (work.get("status") or {}).get("conditions") or []:
        if entry.get("type") == type_:
            return dict(entry)
    return None


def message_limit(entries: int) -> int:
    """Characters each of ``entries`` applied messages may take (see the module docstring)."""
    share = APPLIED_MESSAGES_BUDGET // max(entries, 1)
    return max(APPLIED_MESSAGE_FLOOR, min(APPLIED_MESSAGE_LIMIT, share))


def aggregated_item(cluster: str, work: Mapping[str, Any],
                    limit: int = APPLIED_MESSAGE_LIMIT) -> dict[str, Any]:
    """One ``aggregatedStatus[]`` entry from the cluster's Work (its first manifest).

    The ``Applied`` message is cut to ``limit`` characters, saying so.
    """
    item: dict[str, Any] = {"clusterName": cluster}
    entries = [e for e in (work.get("status") or {}).get("manifestStatuses") or []
               if (e.get("identifier") or {}).get("ordinal") == 0]
    if entries and entries[0].get("status") is not None:
        item["status"] = entries[0]["status"]
    applied = _condition(work, APPLIED)
    item["applied"] = bool(applied and applied.get("status") == "True")
    if applied is not None and not item["applied"] and applied.get("message"):
        item["appliedMessage"] = text.bound_message(str(applied["message"]), limit)
    item["health"] = str(entries[0].get("health") or UNKNOWN) if entries else UNKNOWN
    return item


def aggregated_status(works: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``aggregatedStatus`` from the binding's Works, by cluster name (messages bounded)."""
    limit = message_limit(sum(1 for w in works.values() if _failed_with_message(w)))
    return [aggregated_item(cluster, works[cluster], limit) for cluster in sorted(works)]


def _failed_with_message(work: Mapping[str, Any]) -> bool:
    applied = _condition(work, APPLIED)
    return applied is not None and applied.get("status") != "True" \
        and bool(applied.get("message"))


def target_clusters(binding: Mapping[str, Any]) -> list[str]:
    """The clusters of ``spec.clusters``."""
    return [str(t["name"]) for t in (binding.get("spec") or {}).get("clusters") or []
            if t.get("name")]


def fully_applied(binding: Mapping[str, Any], items: Sequence[Mapping[str, Any]],
                  now: datetime.datetime,
                  refused: tuple[str, str] | None = None) -> dict[str, Any]:
    """The binding's ``FullyApplied`` condition (lastTransitionTime to be kept if unchanged).

    ``refused``: ``(reason, message)`` when the binding is never propagated (it names a
    template outside its namespace, ...): False with that reason and message.
    """
    applied = {str(i["clusterName"]) for i in items if i.get("applied")}
    targets = target_clusters(binding)
    ok = refused is None and bool(targets) and all(c in applied for c in targets)
    reason, message = refused or (
        (FULLY_APPLIED_SUCCESS, FULLY_APPLIED_SUCCESS_MESSAGE) if ok
        else (FULLY_APPLIED_FAILED, FULLY_APPLIED_FAILED_MESSAGE))
    condition: dict[str, Any] = {"type": FULLY_APPLIED, "status": "True" if ok else "False",
                                 "reason": reason, "message": message,
                                 "lastTransitionTime": wiretime.format_time(now)}
    generation = (binding.get("metadata") or {}).get("generation")
    if generation is not None:
        condition["observedGeneration"] = _int(generation)
    return condition


def same_condition(a: Mapping[str, Any] | None, b: Mapping[str, Any]) -> bool:
    """Whether ``a`` already says what ``b`` says (time aside)."""
    if a is None:
        return False
    return all(a.get(k) == b.get(k) for k in ("status", "reason", "message",
                                               "observedGeneration"))


def deployment_status(template: Mapping[str, Any],
                      items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A Deployment template's status from its members' (Karmada's aggregateDeploymentStatus)."""
    status: dict[str, Any] = dict.fromkeys(DEPLOYMENT_COUNTS, 0)
    generation = _int((template.get("metadata") or {}).get("generation"))
    caught_up = 0
    with_status = [i for i in items if i.get("status") is not None]
    for item in with_status:
        member = item["status"]
        for key in DEPLOYMENT_COUNTS:
            status[key] += _int(member.get(key))
        if (_int(member.get("observedGeneration")) >= _int(member.get("generation"))
                and _int(member.get("resourceTemplateGeneration")) >= generation):
            caught_up += 1
    observed = _int((template.get("status") or {}).get("observedGeneration"))
    if caught_up == len(items):
        observed = generation
    if observed:
        status["observedGeneration"] = observed
    return status


def template_status_changed(template: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether the template's status differs from ``wanted`` in the fields written."""
    current = template.get("status") or {}
    return any(_int(current.get(k)) != _int(v) for k, v in wanted.items())
