"""Wire the MCI controller: settings, provider, leader election, serving."""

from __future__ import annotations

import logging

import prometheus_client

from clusterhealth_core import clock as clocks
from clusterhealth_core import runner, serving
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_mci import controller, metrics
from clusterhealth_mci import settings as mci_settings
from clusterhealth_mci.providers import base, fake
from clusterhealth_mci.providers.haproxy import config as haproxy_config
from clusterhealth_mci.providers.haproxy import provider as haproxy_provider

log = logging.getLogger(__name__)


StartupError = runner.StartupError


def make_provider(settings: mci_settings.MCISettings, clock: clocks.Clock) -> base.Provider:
    """The provider named by ``--provider`` (an explicit table, no plugin discovery)."""
    if settings.provider == "fake":
        return fake.FakeProvider(drain_timeout=settings.drain_timeout, clock=clock)
    try:
        layout = haproxy_config.HAProxyLayout(
            bind_address=settings.haproxy_bind_address,
            bind_port=settings.haproxy_bind_port,
            admin_socket=settings.haproxy_socket,
            map_dir=settings.haproxy_map_dir,
            slots=settings.haproxy_slots,
            servers_per_slot=settings.haproxy_servers_per_slot,
            advertise=settings.haproxy_advertise,
        )
    except ValueError as exc:
        raise StartupError(f"HAProxy layout: {exc}") from exc
    return haproxy_provider.HAProxyProvider(settings.haproxy_socket, layout,
                                            drain_timeout=settings.drain_timeout, clock=clock)


class App:
    """One replica: campaigns for the Lease; runs a fresh controller while leading."""

    def __init__(self, settings: mci_settings.MCISettings, api: kube.ApiClient,
                 provider: base.Provider, registry: prometheus_client.CollectorRegistry,
                 clock: clocks.Clock) -> None:
        self.settings = settings
        self.api = api
        self.provider = provider
        self.clock = clock
        self.metrics = metrics.MCIMetrics(registry)
        self.current: controller.MCIController | None = None

    async def lead(self) -> None:
        """The leader's work."""
        self.current = controller.MCIController(
            self.api, self.provider,
            controller.ControllerSettings(
                ingress_class=self.settings.ingress_class,
                default_class=self.settings.default_class,
                fail_open=self.settings.fail_open,
                workers=self.settings.workers,
                resync_period=self.settings.resync_period,
            ),
            self.metrics, self.clock,
        )
        try:
            await self.current.run()
        finally:
            self.current = None

    def _on_leadership(self, leading: bool) -> None:
        self.metrics.is_leader.set(1 if leading else 0)

    def ready(self) -> tuple[bool, str]:
        """Ready when standing by, or when leading with synced caches."""
        current = self.current
        if current is None:
            return True, "standing by"
        synced = current.mcis.synced and current.clusters.synced
        return synced, "caches synced" if synced else "caches syncing"

    async def run(self) -> None:
        """Run until cancelled."""
        await runner.run_elected(self.api, self.settings.leader_elect, self.settings.election,
                                 self.lead, self._on_leadership, self.clock)


async def _check(api: kube.ApiClient) -> None:
    try:
        await api.list(resources.MULTI_CLUSTER_INGRESSES)
        await api.list(resources.CLUSTERS)
    except errors.NotFound as exc:
        raise StartupError("the MultiClusterIngress or Cluster API is not served here: install "
                           "the clusterhealth-crds chart (or point --kubeconfig at Karmada)"
                           ) from exc
    except errors.Unreachable as exc:
        raise StartupError(f"cannot reach the control plane: {exc}") from exc
    except errors.ApiError as exc:
        raise StartupError(f"the control plane refused: {exc}") from exc


async def serve(settings: mci_settings.MCISettings) -> None:
    """Run until SIGTERM/SIGINT."""
    registry = prometheus_client.CollectorRegistry()
    clock = clocks.Clock()
    async with kube.ApiClient(settings.credentials, user_agent="clusterhealth-mci",
                              max_idle=settings.workers + 4) as api:
        await _check(api)
        provider = make_provider(settings, clock)
        app = App(settings, api, provider, registry, clock)
        server = serving.HealthServer(registry, host=settings.bind_address,
                                      port=settings.healthz_port)
        server.add_readiness("controller", app.ready)
        try:
            await runner.run_until_signalled(app.run(), server)
        finally:
            await provider.close()
