"""Wire the Remedy controller: settings, leader election, serving, the controller."""

from __future__ import annotations

import logging

import prometheus_client

from clusterhealth_core import clock as clocks
from clusterhealth_core import runner, serving
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_remedy import controller, metrics
from clusterhealth_remedy import settings as remedy_settings

log = logging.getLogger(__name__)


StartupError = runner.StartupError


class App:
    """One replica: campaigns for the Lease and runs a fresh controller while leading."""

    def __init__(self, settings: remedy_settings.RemedySettings, api: kube.ApiClient,
                 registry: prometheus_client.CollectorRegistry, clock: clocks.Clock) -> None:
        self.settings = settings
        self.api = api
        self.clock = clock
        self.metrics = metrics.RemedyMetrics(registry)
        self.current: controller.RemedyController | None = None

    async def lead(self) -> None:
        """The leader's work: a controller with fresh caches."""
        self.current = controller.RemedyController(
            self.api,
            controller.ControllerSettings(
                workers=self.settings.workers,
                resync_period=self.settings.resync_period,
                event_namespace=self.settings.event_namespace,
            ),
            self.metrics, self.clock,
        )
        try:
            await self.current.run()
        finally:
            self.current = None
            self.metrics.active_actions.clear()

    def _on_leadership(self, leading: bool) -> None:
        self.metrics.is_leader.set(1 if leading else 0)

    def ready(self) -> tuple[bool, str]:
        """Ready when standing by, or when leading with synced caches."""
        current = self.current
        if current is None:
            return True, "standing by"
        synced = current.clusters.synced and current.remedies.synced
        return synced, "caches synced" if synced else "caches syncing"

    async def run(self) -> None:
        """Run until cancelled."""
        await runner.run_elected(self.api, self.settings.leader_elect, self.settings.election,
                                 self.lead, self._on_leadership, self.clock)


async def _check(api: kube.ApiClient) -> None:
    try:
        await api.list(resources.REMEDIES)
        await api.list(resources.CLUSTERS)
    except errors.NotFound as exc:
        raise StartupError("the Cluster or Remedy API is not served here: install the "
                           "clusterhealth-crds chart (or point --kubeconfig at Karmada)") from exc
    except errors.Unreachable as exc:
        raise StartupError(f"cannot reach the control plane: {exc}") from exc
    except errors.ApiError as exc:
        raise StartupError(f"the control plane refused: {exc}") from exc


async def serve(settings: remedy_settings.RemedySettings) -> None:
    """Run until SIGTERM/SIGINT."""
    registry = prometheus_client.CollectorRegistry()
    async with kube.ApiClient(settings.credentials, user_agent="clusterhealth-remedy",
                              max_idle=settings.workers + 4) as api:
        await _check(api)
        app = App(settings, api, registry, clocks.Clock())
        server = serving.HealthServer(registry, host=settings.bind_address,
                                      port=settings.healthz_port)
        server.add_readiness("controller", app.ready)
        await runner.run_until_signalled(app.run(), server)
