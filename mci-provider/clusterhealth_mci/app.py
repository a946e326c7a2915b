"""Wire the MCI controller: its provider, metrics and controller, served by :mod:`process`."""

from __future__ import annotations

import logging
from collections.abc import Callable

from clusterhealth_core import clock as clocks
from clusterhealth_core import members, process, runner
from clusterhealth_core.kube import resources
from clusterhealth_mci import controller, metrics
from clusterhealth_mci import settings as mci_settings
from clusterhealth_mci.providers import base, fake
from clusterhealth_mci.providers.haproxy import config as haproxy_config
from clusterhealth_mci.providers.haproxy import provider as haproxy_provider

log = logging.getLogger(__name__)



def make_provider(settings: mci_settings.MCISettings, clock: clocks.Clock,
                  fence: Callable[[], None] | None = None) -> base.Provider:
    """The provider named by ``--provider`` (an explicit table, no plugin discovery).

    ``fence`` (the elector's) is asked before every change to the load balancer.
    """
    if settings.provider == "fake":
        return fake.FakeProvider(drain_timeout=settings.drain_timeout, clock=clock)
    try:
        layout = haproxy_config.layout_from(settings, advertise=settings.haproxy_advertise)
    except ValueError as exc:
        raise runner.StartupError(f"HAProxy layout: {exc}") from exc
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

    async def start(running: process.Process) -> process.Work:
        mci_metrics = metrics.MCIMetrics(running.registry)
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
        replica = running.elect(
            controller.COMPONENT,
            lambda term: controller.MCIController(term, provider, controller_settings,
                                                  mci_metrics),
            mci_metrics.is_leader,
            on_stop=mci_metrics.clear,  # the next leader reports the MCIs now
            # One HAProxy per replica (the chart's sidecar): standbys program theirs too.
            standby=settings.standby_programs,
        )
        # A shared HAProxy's runtime commands are fenced like the API writes: none after the
        # Lease is lost.  With one HAProxy per replica (--standby-programs) each replica is the
        # only writer of its own, and a standby must program it: no fence there.
        fence = (replica.elector.check_fence
                 if replica.elector is not None and not settings.standby_programs else None)
        provider = make_provider(settings, running.clock, fence)
        running.cleanup.push_async_callback(provider.close)
        return replica.run()

    await process.serve(settings, process.Component(
        "mci-provider", user_agent="clusterhealth-mci", max_connections=settings.workers + 4,
        needed=(resources.MULTI_CLUSTER_INGRESSES, resources.CLUSTERS)), start)
