"""Wire the MCI controller: settings, provider, leader election, serving."""

from __future__ import annotations

import logging
from collections.abc import Callable

import prometheus_client

from clusterhealth_core import buildinfo, members, runner, serving
from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_mci import controller, metrics
from clusterhealth_mci import settings as mci_settings
from clusterhealth_mci.providers import base, fake
from clusterhealth_mci.providers.haproxy import config as haproxy_config
from clusterhealth_mci.providers.haproxy import provider as haproxy_provider

log = logging.getLogger(__name__)


StartupError = runner.StartupError
INSTALL_HINT = "install the clusterhealth-crds chart (or point --kubeconfig at Karmada)"


def make_provider(settings: mci_settings.MCISettings, clock: clocks.Clock,
                  fence: Callable[[], None] | None = None) -> base.Provider:
    """The provider named by ``--provider`` (an explicit table, no plugin discovery).

    ``fence`` (the elector's) is asked before every change to the load balancer.
    """
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
                                            drain_timeout=settings.drain_timeout, clock=clock,
                                            monitor_interval=settings.haproxy_monitor_interval,
                                            fence=fence)


def log_member_credentials(settings: mci_settings.MCISettings) -> None:
    """Say once, at start, whose credentials will read the members."""
    if settings.member_credentials == members.READONLY:
        log.info("member clusters are read with the provider's own read-only credentials: the "
                 "Secret named like each Cluster in %s (the Clusters' own secretRef is never "
                 "read)", settings.member_secret_namespace)
    else:
        log.warning("member clusters are read with each Cluster's own spec.secretRef "
                    "credentials in %s (--member-credentials=cluster), which may do far more "
                    "than read Services and EndpointSlices (karmadactl join's may do anything); "
                    "the default, --member-credentials=readonly, reads them with a read-only "
                    "identity of the provider's own (docs/operations.md)",
                    settings.cluster_secret_namespace)


async def serve(settings: mci_settings.MCISettings) -> None:
    """Run until SIGTERM/SIGINT."""
    log_member_credentials(settings)
    registry = prometheus_client.CollectorRegistry()
    leadership = buildinfo.register(registry, 'mci-provider')
    clock = clocks.Clock()
    mci_metrics = metrics.MCIMetrics(registry)
    async with kube.ApiClient(settings.credentials, user_agent="clusterhealth-mci",
                              max_connections=settings.workers + 4) as api:
        await runner.check_served(api, [resources.MULTI_CLUSTER_INGRESSES, resources.CLUSTERS],
                                  INSTALL_HINT)
        controller_settings = controller.ControllerSettings(
            ingress_class=settings.ingress_class,
            default_class=settings.default_class,
            fail_open=settings.fail_open,
            workers=settings.workers,
            resync_period=settings.resync_period,
            member_credentials=settings.member_credentials,
            member_secret_namespace=settings.member_secret_namespace,
            cluster_secret_namespace=settings.cluster_secret_namespace,
            drain_timeout=settings.drain_timeout,
        )
        replica = runner.ElectedController(
            api, settings.leader_elect, settings.election, clock,
            make=lambda term: controller.MCIController(term, provider, controller_settings,
                                                       mci_metrics),
            leader_gauge=mci_metrics.is_leader,
            metrics=runner.ProcessMetrics(registry),
            leadership=leadership,
            term=runner.TermSettings(controller.COMPONENT),
            on_stop=mci_metrics.clear,  # the next leader reports the MCIs now
            # One HAProxy per replica (the chart's sidecar): standbys program theirs too.
            standby=settings.standby_programs,
        )
        # A shared HAProxy's runtime commands are fenced like the API writes: none after the
        # Lease is lost.  With one HAProxy per replica (--standby-programs) each replica is the
        # only writer of its own, and a standby must program it: no fence there.
        fence = (replica.elector.check_fence
                 if replica.elector is not None and not settings.standby_programs else None)
        provider = make_provider(settings, clock, fence)
        server = serving.HealthServer(registry, host=settings.bind_address,
                                      port=settings.healthz_port, tls=settings.tls)
        server.add_liveness("leader-election", replica.alive)
        server.add_readiness("controller", replica.ready)
        try:
            await runner.run_until_signalled(replica.run(), server)
        finally:
            await provider.close()
