"""Wire the agent together: probe loop, node publisher, elected reporter; :mod:`process` serves it.

Nothing here decides anything; the decisions live in ``hysteresis``,
``aggregate`` and the probes, the I/O in ``nodestatus`` and ``reporter``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import prometheus_client

from clusterhealth_agent import aggregate, hysteresis, metrics, nodestatus, reporter
from clusterhealth_agent import settings as agent_settings
from clusterhealth_agent.probes import base
from clusterhealth_agent.probes import config as probe_config
from clusterhealth_agent.probes import registry as probe_registry
from clusterhealth_core import buildinfo, process, runner, serving, status
from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources

log = logging.getLogger(__name__)


class Agent:
    """One agent pod: probes its node every period; reports while it leads."""

    def __init__(
        self,
        settings: agent_settings.AgentSettings,
        probes: list[base.Probe],
        member_api: kube.ApiClient,
        control_plane_api: kube.ApiClient,
        registry: prometheus_client.CollectorRegistry,
        clock: clocks.Clock,
        leadership: buildinfo.Leadership | None,
    ) -> None:
        self.settings = settings
        self.probes = probes
        self.member_api = member_api
        self.control_plane_api = control_plane_api
        self.clock = clock
        self.registry = registry
        self.metrics = metrics.AgentMetrics(registry, settings.cluster_name,
                                            settings.node_name)
        self.leadership = leadership
        self.probe_metrics = base.ProbeMetrics(registry)
        thresholds = hysteresis.Thresholds(settings.failure_threshold, settings.success_threshold)
        self.filters = {p.condition_type: hysteresis.Filter(thresholds) for p in probes}
        self.publisher = nodestatus.NodePublisher(
            member_api, settings.node_name, settings.node_heartbeat_period, clock
        )
        # The leader caches every Node but reads only a few conditions of each (see
        # aggregate.slim_node); small pages keep the transient parse small too.
        self.nodes = informer.Informer(
            member_api, resources.NODES,
            transform=aggregate.slim_node([p.condition_type for p in probes]),
            settings=informer.InformerSettings(page_size=100), clock=clock)
        self.reporter = reporter.Reporter(
            reporter.ReportSettings(
                cluster_name=settings.cluster_name,
                condition_types=[p.condition_type for p in probes],
                period=settings.detect_period,
                report_period=settings.report_period,
                stale_threshold=settings.stale_threshold,
                failure_quorum=settings.failure_quorum,
            ),
            self.nodes, control_plane_api, self.metrics, clock,
            status.SchemaMetrics(registry),
        )
        self.last_round: float | None = None
        self.published_once = False
        self.leading = False

    async def probe_round(self, started: float) -> dict[str, base.ProbeResult]:
        """Run every probe once (concurrently, shared deadline); return reported results.

        ``started`` is the round's scheduled start: observations are dated by it.
        """
        results = await asyncio.gather(*(
            base.run_probe(p, p.timeout or self.settings.probe_timeout, self.probe_metrics)
            for p in self.probes
        ))
        reported = {}
        for probe, result in zip(self.probes, results, strict=True):
            reported[probe.condition_type] = self.filters[probe.condition_type].observe(
                result, started)
            self.metrics.set_node(self.settings.node_name, probe.condition_type,
                                  nodestatus.condition_status(reported[probe.condition_type]))
        return reported

    async def node_loop(self) -> None:
        """Probe and publish every detect period, on a fixed schedule, forever."""
        started = self.clock.monotonic()
        while True:
            reported = await self.probe_round(started)
            try:
                await self.publisher.publish(reported)
                self.published_once = True
            except (errors.KubeError, OSError) as exc:
                self.metrics.report_errors.labels("node").inc()
                log.warning("publishing node %s conditions failed: %s",
                            self.settings.node_name, exc)
            self.last_round = self.clock.monotonic()
            started += self.settings.detect_period
            if started < self.last_round:  # overran: skip the missed rounds
                missed = (self.last_round - started) // self.settings.detect_period + 1
                started += missed * self.settings.detect_period
            await self.clock.sleep(started - self.last_round)

    def _alive(self) -> tuple[bool, str]:
        if self.last_round is None:
            return True, "starting"
        age = self.clock.monotonic() - self.last_round
        return age < 3 * self.settings.detect_period + 5, f"last probe round {age:.1f}s ago"

    def _ready(self) -> tuple[bool, str]:
        return self.published_once, "node conditions published" if self.published_once \
            else "node conditions not yet published"

    def _node_cache(self) -> tuple[bool, str]:
        if not self.leading:
            return True, "not leading: no node cache"
        return self.nodes.health()

    def _on_leadership(self, leading: bool) -> None:
        self.leading = leading
        self.metrics.is_leader.labels(self.settings.cluster_name).set(1 if leading else 0)
        if self.leadership is not None:
            self.leadership.set(leading)

    async def lead(self, control_plane: kube.ApiClient) -> None:
        """The leader's work: keep the node cache and report through ``control_plane``.

        ``control_plane`` is fenced by the elector: no report is sent once this
        pod may no longer lead.
        """
        self.reporter.control_plane = control_plane
        cache = asyncio.create_task(self.nodes.run(), name="node-informer")
        try:
            await self.reporter.run()
        finally:
            cache.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await cache

    async def run(self, server: serving.HealthServer | None = None) -> None:
        """Run until cancelled."""
        if server is not None:
            server.add_liveness("probe-loop", self._alive)
            server.add_readiness("node-published", self._ready)
            server.add_readiness("node-cache", self._node_cache)
        tasks = [asyncio.create_task(self.node_loop(), name="node-loop")]
        tasks.append(asyncio.create_task(runner.run_elected(
            self.member_api, self.settings.leader_elect, self.settings.election, self.lead,
            self._on_leadership, self.clock, writes=self.control_plane_api, server=server),
            name="election"))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _check_member(api: kube.ApiClient, settings: agent_settings.AgentSettings) -> None:
    try:
        await api.get(resources.NODES, settings.node_name)
    except errors.NotFound as exc:
        raise runner.StartupError(f"node {settings.node_name!r} does not exist in the member "
                           "cluster (check --host-name / $NODE_NAME)") from exc
    except errors.Unreachable as exc:
        raise runner.StartupError(f"cannot reach the member API server: {exc}") from exc
    except errors.ApiError as exc:
        raise runner.StartupError(f"the member API server refused: {exc}") from exc


async def serve(settings: agent_settings.AgentSettings, specs: list[probe_config.ProbeSpec]
                ) -> None:
    """Build everything from validated settings and run until SIGTERM/SIGINT."""

    async def start(running: process.Process) -> process.Work:
        member, control_plane = running.clients
        await _check_member(member, settings)
        context = probe_registry.BuildContext(
            cluster_domain=settings.cluster_domain,
            nameservers=settings.nameservers,
            node_ip=settings.node_ip,
            member_api=member,
        )
        probes = probe_registry.build_probes(settings.detectors, specs, context,
                                             running.registry)
        agent = Agent(settings, probes, member, control_plane, running.registry, running.clock,
                      running.leadership)
        log.info("agent for cluster %s on node %s: probes %s", settings.cluster_name,
                 settings.node_name, ", ".join(repr(p) for p in probes))
        return agent.run(running.server)

    await process.serve(settings, process.Component(
        "agent", user_agent="clusterhealth-agent", more_clients=(settings.control_plane,)), start)
