"""Wire the controller manager: settings, leader election, serving, the selected controllers."""

from __future__ import annotations

import prometheus_client

from clusterhealth_controlplane import controllers, manager, metrics
from clusterhealth_controlplane import settings as manager_settings
from clusterhealth_core import buildinfo, runner, serving
from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube

COMPONENT = "clusterhealth-controlplane"
INSTALL_HINT = "install the clusterhealth-crds chart (or point --kubeconfig at Karmada)"


async def serve(settings: manager_settings.ControlPlaneSettings) -> None:
    """Run until SIGTERM/SIGINT."""
    registry = prometheus_client.CollectorRegistry()
    leadership = buildinfo.register(registry, 'controlplane')
    clock = clocks.Clock()
    leader = prometheus_client.Gauge(
        "clusterhealth_controlplane_is_leader",
        "1 while this replica holds the controller manager's Lease.", registry=registry)
    failover_metrics = metrics.FailoverMetrics(registry)
    entries = controllers.selected(settings.controllers)
    async with kube.ApiClient(settings.credentials, user_agent=COMPONENT,
                              max_connections=settings.workers * len(entries) + 4,
                              http=settings.http_library) as api:
        await runner.check_served(api, controllers.needed(settings.controllers), INSTALL_HINT)
        replica = runner.ElectedController(
            api, settings.leader_elect, settings.election, clock,
            make=lambda term: manager.Manager(
                manager.Context(term, settings.workers, settings.resync_period,
                                options=settings.options, metrics=failover_metrics,
                                member_limits=settings.member_limits), entries),
            leader_gauge=leader,
            metrics=runner.ProcessMetrics(registry),
            leadership=leadership,
            term=runner.TermSettings(COMPONENT, settings.event_namespace),
        )
        server = serving.HealthServer(registry, host=settings.bind_address,
                                      port=settings.healthz_port, tls=settings.tls)
        server.add_liveness("leader-election", replica.alive)
        server.add_readiness("controllers", replica.ready)
        await runner.run_until_signalled(replica.run(), server)
