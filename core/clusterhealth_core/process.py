"""Serve a component's process: what every component's ``serve`` does alike, written once.

:func:`serve` makes the registry (:func:`buildinfo.register`), the clock, the
event loop's lag and the collector's pauses as metrics (:mod:`pauses`), the
API clients and the health/metrics server, checks that the needed APIs are
served, and hands them to the component's ``start``, which makes what is its
own and returns its work; that runs until SIGTERM/SIGINT
(:func:`runner.run_until_signalled`), then everything is closed in reverse.
:meth:`Process.elect` runs a controller under leader election.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import prometheus_client

from clusterhealth_core import buildinfo, pauses, runner, serving, settings
from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, resources

INSTALL_HINT = "install the clusterhealth-crds chart (or point --kubeconfig at Karmada)"
"""What a start-up error says when the APIs a component needs are not served."""

Work = Coroutine[Any, Any, None]
"""What a component's process runs until it is signalled."""


@dataclasses.dataclass(frozen=True)
class Component:
    """What :func:`serve` needs to know of a component beside its settings."""

    name: str
    """The ``component`` label of ``clusterhealth_build_info`` and ``clusterhealth_leader``."""
    user_agent: str = "clusterhealth"
    max_connections: int | None = 16
    """Connections to each API server (:class:`kube.ApiClient`'s)."""
    needed: Sequence[resources.Resource] = ()
    """APIs the first client's server must serve, or the process does not start."""
    more_clients: Sequence[config.Credentials] = ()
    """Further API servers to open a client to (the agent's control plane)."""


@dataclasses.dataclass(frozen=True)
class Process:
    """What :func:`serve` made, handed to the component's ``start``."""

    settings: settings.ProcessSettings
    registry: prometheus_client.CollectorRegistry
    clock: clocks.Clock
    server: serving.HealthServer
    """Not started yet: the component adds its checks."""
    leadership: buildinfo.Leadership | None
    clients: tuple[kube.ApiClient, ...]
    """One per kubeconfig: ``settings.credentials`` first, then :attr:`Component.more_clients`."""
    cleanup: contextlib.AsyncExitStack
    """Closed when the process stops (after the server, before the clients)."""

    @property
    def api(self) -> kube.ApiClient:
        """The client to the API server of ``--kubeconfig``."""
        return self.clients[0]

    def elect(self, name: str, make: Callable[[runner.Term], runner.Controller],
              leader_gauge: prometheus_client.Gauge, *, readiness: str = "controller",
              on_stop: Callable[[], None] | None = None,
              standby: bool = False) -> runner.ElectedController:
        """A replica running ``make``'s controller while it leads, its checks served.

        ``name`` is the component the term's Events are reported by; the
        liveness check is ``leader-election``, the readiness check
        ``readiness``.  See :class:`runner.ElectedController` for the rest.
        """
        election = self.settings.election
        if election is None:
            raise TypeError("elect() needs the leader-election flags (ProcessFlags.lease)")
        replica = runner.ElectedController(
            self.api, self.settings.leader_elect, election, self.clock,
            make=make, leader_gauge=leader_gauge,
            metrics=runner.ProcessMetrics(self.registry),
            leadership=self.leadership,
            term=runner.TermSettings(name, self.settings.event_namespace),
            on_stop=on_stop, standby=standby)
        self.server.add_liveness("leader-election", replica.alive)
        self.server.add_readiness(readiness, replica.ready)
        return replica


Start = Callable[[Process], Awaitable[Work]]
"""A component's own part: make what it runs from the :class:`Process`, return its work."""


async def serve(process_settings: settings.ProcessSettings, component: Component,
                start: Start) -> None:
    """Run ``component`` until SIGTERM/SIGINT (:class:`runner.StartupError` if it cannot)."""
    registry = prometheus_client.CollectorRegistry()
    leadership = buildinfo.register(registry, component.name,
                                    elected=process_settings.election is not None)
    clock = clocks.Clock()
    first = [] if process_settings.credentials is None else [process_settings.credentials]
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(pauses.measured(registry, clock))
        clients = [await stack.enter_async_context(kube.ApiClient(
            each, user_agent=component.user_agent, max_connections=component.max_connections,
            http=process_settings.http_library)) for each in [*first, *component.more_clients]]
        if component.needed:
            await runner.check_served(clients[0], component.needed, INSTALL_HINT)
        server = serving.HealthServer(registry, host=process_settings.bind_address,
                                      port=process_settings.healthz_port,
                                      tls=process_settings.tls, clock=clock)
        async with contextlib.AsyncExitStack() as cleanup:
            work = await start(Process(process_settings, registry, clock, server, leadership,
                                       tuple(clients), cleanup))
            await runner.run_until_signalled(work, server)
