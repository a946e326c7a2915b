"""Wire the Remedy controller: settings, leader election, serving, the controller."""

from __future__ import annotations

import logging

import prometheus_client

from clusterhealth_core import buildinfo, runner, serving
from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_remedy import controller, metrics
from clusterhealth_remedy import settings as remedy_settings

log = logging.getLogger(__name__)


StartupError = runner.StartupError
INSTALL_HINT = "install the clusterhealth-crds chart (or point --kubeconfig at Karmada)"


async def serve(settings: remedy_settings.RemedySettings) -> None:
    """Run until SIGTERM/SIGINT."""
    registry = prometheus_client.CollectorRegistry()
    leadership = buildinfo.register(registry, 'remedy')
    clock = clocks.Clock()
    remedy_metrics = metrics.RemedyMetrics(registry)
    controller_settings = controller.ControllerSettings(
        workers=settings.workers, resync_period=settings.resync_period)
    async with kube.ApiClient(settings.credentials, user_agent="clusterhealth-remedy",
                              max_connections=settings.workers + 4,
                              http=settings.http_library) as api:
        await runner.check_served(api, [resources.REMEDIES, resources.CLUSTERS], INSTALL_HINT)
        replica = runner.ElectedController(
            api, settings.leader_elect, settings.election, clock,
            make=lambda term: controller.RemedyController(term, controller_settings,
                                                          remedy_metrics),
            leader_gauge=remedy_metrics.is_leader,
            metrics=runner.ProcessMetrics(registry),
            leadership=leadership,
            term=runner.TermSettings(controller.COMPONENT, settings.event_namespace),
            on_stop=remedy_metrics.clear,
        )
        server = serving.HealthServer(registry, host=settings.bind_address,
                                      port=settings.healthz_port, tls=settings.tls)
        server.add_liveness("leader-election", replica.alive)
        server.add_readiness("controller", replica.ready)
        await runner.run_until_signalled(replica.run(), server)
