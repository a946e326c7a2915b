"""The leader's loop: aggregate the nodes, write the Cluster's conditions.

Runs only while this pod holds the Lease.  Every detect period it decides
each condition type from the node cache (:mod:`clusterhealth_agent.aggregate`)
and server-side-applies the agent's conditions to ``clusters/status`` in the
control plane, under the field manager ``clusterhealth-agent`` (shared by
every pod, so a new leader owns what the old one wrote).  It writes when a
status, reason or message changed, and otherwise re-applies every
``report_period``.  ``lastTransitionTime`` changes only on a status flip.

With the control plane unreachable the loop keeps deciding from fresh node
results and writes the *current* state as soon as the control plane answers;
a write that fails is simply retried on the next cycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Sequence

from clusterhealth_agent import aggregate, metrics
from clusterhealth_core import clock as clocks
from clusterhealth_core import schema, status
from clusterhealth_core.api import meta
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources

log = logging.getLogger(__name__)

FIELD_MANAGER = "clusterhealth-agent"


@dataclasses.dataclass(frozen=True)
class ReportSettings:
    """What the leader needs to know."""

    cluster_name: str
    condition_types: Sequence[str]
    period: float
    report_period: float
    stale_threshold: float
    failure_quorum: float


class Reporter:
    """Aggregates the member's nodes and reports to the control plane."""

    def __init__(
        self,
        settings: ReportSettings,
        nodes: informer.Informer,
        control_plane: kube.ApiClient,
        agent_metrics: metrics.AgentMetrics,
        clock: clocks.Clock,
        schema_metrics: status.SchemaMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.nodes = nodes
        self.control_plane = control_plane
        self.metrics = agent_metrics
        self.clock = clock
        self._last: tuple[tuple[str, bool | None, str, str], ...] | None = None
        self._last_at = float("-inf")
        self._changed = asyncio.Event()
        self.schema_metrics = schema_metrics
        self._status_writer: status.StatusWriter | None = None
        nodes.add_handler(self._on_node_event)

    async def _writer(self) -> status.StatusWriter:
        """The condition writer for this server, from its schema (read once per term).

        On our control plane ``status.conditions`` is a list-map (server-side
        apply); on Karmada's Cluster API it is atomic, so the writer merges
        the agent's conditions into the live list instead of replacing it.
        """
        if self._status_writer is None or self._status_writer.api is not self.control_plane:
            kind = await schema.discover(self.control_plane, resources.CLUSTERS)
            self._status_writer = status.StatusWriter(
                self.control_plane, kind, FIELD_MANAGER, frozenset({"conditions"}),
                frozenset(self.settings.condition_types), self.schema_metrics)
        return self._status_writer

    def _on_node_event(self, event: str, obj: dict[str, object], old: object) -> None:
        self._changed.set()

    def decide(self) -> list[aggregate.Verdict]:
        """One verdict per condition type from the current node cache."""
        views = [aggregate.node_view(node, self.settings.condition_types)
                 for node in self.nodes.store.values()]
        now = self.clock.now()
        return [
            aggregate.aggregate(ctype, views, now, self.settings.stale_threshold,
                                self.settings.failure_quorum)
            for ctype in self.settings.condition_types
        ]

    async def report(self, verdicts: Sequence[aggregate.Verdict]) -> bool:
        """Write the verdicts if something changed or the report period passed.

        The control plane is read only when a write is due (to keep
        transition times and the conditions whose last report is kept).
        """
        key = tuple((v.condition_type, v.status, v.reason, v.message) for v in verdicts)
        fresh = self.clock.monotonic() - self._last_at < self.settings.report_period
        if key == self._last and fresh:
            return False
        live_obj = await self.control_plane.get(resources.CLUSTERS, self.settings.cluster_name)
        live = {c.type: c for c in status.live_conditions(live_obj)}
        now = self.clock.now().replace(microsecond=0)
        desired: list[meta.Condition] = []
        for verdict in verdicts:
            if verdict.status is None:
                kept = live.get(verdict.condition_type)
                if kept is not None:
                    desired.append(kept)  # keep the last report and stay its owner
                continue
            desired.append(meta.Condition(
                type=verdict.condition_type,
                status=meta.ConditionStatus.TRUE if verdict.status else meta.ConditionStatus.FALSE,
                last_transition_time=now,
                reason=verdict.reason,
                message=verdict.message,
            ))
        desired = status.keep_transition_times(live.values(), desired)
        writer = await self._writer()
        await writer.write(self.settings.cluster_name,
                           {"conditions": [c.to_dict() for c in desired]})
        if key != self._last:
            log.info("reported %s", "; ".join(
                f"{v.condition_type}={'keep' if v.status is None else v.status} ({v.reason})"
                for v in verdicts))
        self._last = key
        self._last_at = self.clock.monotonic()
        self.metrics.last_report_success.labels(self.settings.cluster_name).set(time.time())
        for condition in desired:
            self.metrics.set_cluster(condition.type, condition.status.value)
        return True

    async def run(self) -> None:
        """Report on every node change and at least every period, until cancelled.

        Reacting to the node cache's events keeps the detection latency at the
        watch latency; the periodic pass catches results going stale.
        """
        await self.nodes.wait_synced()
        try:
            while True:
                self._changed.clear()
                try:
                    await self.report(self.decide())
                except (errors.KubeError, OSError) as exc:
                    self.metrics.report_errors.labels("control-plane").inc()
                    log.warning("report to the control plane failed: %s", exc)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.settings.period):
                        await self._changed.wait()
        finally:
            self.metrics.clear_cluster()
            self._status_writer = None
            self._last = None
            self._last_at = float("-inf")

