"""Which graceful-eviction tasks of a binding end now, and when to look again: pure.

A graceful-eviction task (``spec.gracefulEvictionTasks[]``) keeps a cluster's
Work, and so the application there, while the replicas it had are started
elsewhere.  Karmada's rules (v1.18.2, ``pkg/controllers/gracefuleviction``):

* a task without ``creationTimestamp`` is stamped now and kept;
* ``suppressDeletion: true`` keeps the task for good (a user holds the old
  copy); ``suppressDeletion: false`` ends it at once (a user confirmed the old
  copy may go);
* otherwise the task ends when ``creationTimestamp`` plus its own
  ``gracePeriodSeconds`` (else ``--graceful-eviction-timeout``) is reached,
  each task with its own deadline (Karmada 7184 fixed one task's grace period
  leaking into the next);
* or earlier, once the binding is scheduled for its current generation and
  every target cluster reports Healthy in ``status.aggregatedStatus``.

Beyond Karmada, so that no task ends too early and none is ever stuck:

* "scheduled" is ``schedulerObservedGeneration == metadata.generation`` *and*
  the ``Scheduled`` condition True: an unschedulable binding keeps its task
  until the deadline instead of being emptied (Karmada 7455: an empty
  ``spec.clusters`` counted as "all healthy" and the only copy was deleted);
  no targets never counts as healthy;
* the aggregated status must be the one computed for this generation (its
  ``FullyApplied`` condition's ``observedGeneration``, when it has one), so a
  health reported before the eviction moved the replicas is not taken for the
  replacement's (the race Karmada 7129 describes);
* the deadline does not depend on scheduling at all: a binding whose only
  cluster was evicted and that can never be scheduled again (Karmada 5803,
  3747) still loses its task at the deadline, and the controller asks to be
  called again exactly then (:attr:`Assessment.next_check`) rather than
  waiting for an update of the binding that may never come;
* a deadline is reached at ``now >= deadline`` (Karmada: strictly after), so
  the requeue at the deadline ends the task instead of spinning.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from clusterhealth_controlplane import vocabulary, wiretime

WHY_HEALTHY = "healthy"
"""Ended: the binding is scheduled for its generation and every target is Healthy."""
WHY_TIMEOUT = "timeout"
"""Ended: ``--graceful-eviction-timeout`` after the task was created."""
WHY_GRACE_PERIOD = "grace_period"
"""Ended: the task's own ``gracePeriodSeconds`` after it was created."""
WHY_CONFIRMED = "confirmed"
"""Ended: ``suppressDeletion: false`` (a user confirmed the old copy may go)."""


@dataclasses.dataclass(frozen=True)
class Ended:
    """One task ended: the cluster it evicted from, and why."""

    cluster: str
    why: str


@dataclasses.dataclass(frozen=True)
class Assessment:
    """The tasks to keep (wire shape), those ended, and when to look again."""

    kept: list[dict[str, Any]]
    ended: list[Ended]
    changed: bool
    """Whether ``kept`` differs from the binding's tasks (ended, or a timestamp stamped)."""
    next_check: float | None
    """Seconds until the earliest deadline of a kept task (None: no kept task has one)."""


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def tasks(binding: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The binding's graceful-eviction tasks."""
    return list((binding.get("spec") or {}).get("gracefulEvictionTasks") or [])


def _condition(binding: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for entry in (binding.get("status") or {}).get("conditions") or []:
        if entry.get("type") == type_:
            return dict(entry)
    return None


def scheduled(binding: Mapping[str, Any]) -> bool:
    """Scheduled for the current generation: observed by the scheduler, ``Scheduled`` True."""
    generation = _int((binding.get("metadata") or {}).get("generation"))
    observed = _int((binding.get("status") or {}).get("schedulerObservedGeneration"))
    condition = _condition(binding, vocabulary.SCHEDULED)
    return (generation > 0 and observed == generation and condition is not None
            and condition.get("status") == "True")


def status_current(binding: Mapping[str, Any]) -> bool:
    """Whether ``aggregatedStatus`` was computed for the binding's current generation."""
    condition = _condition(binding, vocabulary.FULLY_APPLIED)
    if condition is None:
        return False
    observed = condition.get("observedGeneration")
    return observed is None or _int(observed) == _int(
        (binding.get("metadata") or {}).get("generation"))


def targets_healthy(binding: Mapping[str, Any]) -> bool:
    """Every cluster of ``spec.clusters`` reports Healthy (no targets: not healthy)."""
    targets = [str(t.get("name")) for t in (binding.get("spec") or {}).get("clusters") or []
               if t.get("name")]
    if not targets:
        return False
    health = {str(i.get("clusterName")): i.get("health")
              for i in (binding.get("status") or {}).get("aggregatedStatus") or []}
    return all(health.get(cluster) == vocabulary.HEALTHY for cluster in targets)


def replaced(binding: Mapping[str, Any]) -> bool:
    """The replacement is in place: scheduled for this generation, fresh status, all Healthy."""
    return scheduled(binding) and status_current(binding) and targets_healthy(binding)


def deadline(task: Mapping[str, Any], timeout: float) -> tuple[datetime.datetime, str] | None:
    """When ``task`` ends at the latest, and why then (None: no valid creationTimestamp yet)."""
    created = wiretime.parse_time(task.get("creationTimestamp"))
    if created is None:
        return None
    grace = task.get("gracePeriodSeconds")
    if grace is not None:
        return created + datetime.timedelta(seconds=_int(grace)), WHY_GRACE_PERIOD
    return created + datetime.timedelta(seconds=timeout), WHY_TIMEOUT


def assess(binding: Mapping[str, Any], now: datetime.datetime, timeout: float) -> Assessment:
    """The binding's tasks after applying the rules above at ``now``."""
    current = tasks(binding)
    healthy = replaced(binding)
    kept: list[dict[str, Any]] = []
    ended: list[Ended] = []
    waits: list[float] = []
    stamped = False
    for task in current:
        cluster = str(task.get("fromCluster") or "")
        suppress = task.get("suppressDeletion")
        if suppress is True:
            kept.append(dict(task))
            continue
        if suppress is False:
            ended.append(Ended(cluster, WHY_CONFIRMED))
            continue
        limit = deadline(task, timeout)
        if limit is None:
            kept.append({**task, "creationTimestamp": wiretime.format_time(now)})
            stamped = True
            waits.append(timeout if task.get("gracePeriodSeconds") is None
                         else float(_int(task.get("gracePeriodSeconds"))))
            continue
        when, why = limit
        if now >= when:
            ended.append(Ended(cluster, why))
        elif healthy:
            ended.append(Ended(cluster, WHY_HEALTHY))
        else:
            kept.append(dict(task))
            waits.append((when - now).total_seconds())
    return Assessment(kept, ended, bool(ended) or stamped, min(waits) if waits else None)


def tasks_patch(binding: Mapping[str, Any], kept: Sequence[Mapping[str, Any]]
                ) -> dict[str, Any]:
    """A merge patch writing ``kept`` as the tasks, guarded by the binding's resourceVersion."""
    meta_ = binding.get("metadata") or {}
    return {"metadata": {"resourceVersion": meta_.get("resourceVersion")},
            "spec": {"gracefulEvictionTasks": [dict(t) for t in kept] or None}}
