"""Wire the scheduler process: settings, its own Lease, serving, the controller."""

from __future__ import annotations

import prometheus_client

from clusterhealth_controlplane.scheduler import controller, metrics
from clusterhealth_controlplane.scheduler import settings as scheduler_settings
from clusterhealth_core import buildinfo, runner, serving
from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources

INSTALL_HINT = "install the clusterhealth-crds chart (or point --kubeconfig at Karmada)"
NEEDED = (resources.RESOURCE_BINDINGS, resources.CLUSTER_RESOURCE_BINDINGS, resources.CLUSTERS)


async def serve(settings: scheduler_settings.SchedulerSettings) -> None:
    """Run until SIGTERM/SIGINT."""
    registry = prometheus_client.CollectorRegistry()
    leadership = buildinfo.register(registry, 'scheduler')
    clock = clocks.Clock()
    scheduler_metrics = metrics.SchedulerMetrics(registry)
    controller_settings = controller.ControllerSettings(
        plugins=settings.plugins, scheduler_name=settings.scheduler_name,
        workers=settings.workers)
    async with kube.ApiClient(settings.credentials, user_agent=controller.COMPONENT,
                              max_connections=settings.workers * 2 + 4,
                              http=settings.http_library) as api:
        await runner.check_served(api, NEEDED, INSTALL_HINT)
        replica = runner.ElectedController(
            api, settings.leader_elect, settings.election, clock,
            make=lambda term: controller.Scheduler(term, controller_settings, scheduler_metrics),
            leader_gauge=scheduler_metrics.is_leader,
            metrics=runner.ProcessMetrics(registry),
            leadership=leadership,
            term=runner.TermSettings(controller.COMPONENT, settings.event_namespace),
        )
        server = serving.HealthServer(registry, host=settings.bind_address,
                                      port=settings.healthz_port, tls=settings.tls)
        server.add_liveness("leader-election", replica.alive)
        server.add_readiness("scheduler", replica.ready)
        await runner.run_until_signalled(replica.run(), server)
