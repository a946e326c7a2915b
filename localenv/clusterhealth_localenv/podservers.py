"""Each Ready Pod's IP served by a real HTTP server: the data plane of kwok's Pods.

kwok runs Pods without containers and gives them IPs from the member's Pod
range (:mod:`.workloads`), so the EndpointSlices a member's controller
manager writes list addresses nothing listens on.  For the demo (and anyone
who wants traffic to really follow Pods), :class:`PodServers` lists one
app's Pods in a member and runs an :class:`httpload.Backend` on every Ready
Pod's IP and the app's port, answering ``<member>/<pod>``; with a
:class:`~clusterhealth_localenv.podnet.PodNetwork`'s ``listen`` the servers
listen inside that network, where the Pod IPs are real.

It behaves like a real cluster's data plane:

- while the member's API server does not answer, every server keeps running
  (a cluster's Pods keep serving while its control plane is down);
- a Pod that went away (deleted, or no longer Ready) keeps its server for
  ``grace`` seconds, as a terminating container finishes what the load
  balancer still sends it until the endpoint removal reaches it
  (``terminationGracePeriodSeconds``);
- a new Ready Pod is served at the next poll (every ``interval`` seconds).

:func:`plan` is the decision, pure and tested with tables; the class does the I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
from collections.abc import Callable, Mapping
from typing import Any

from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import httpload

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Serving:
    """What is served at one Pod IP: the Pod's name, and since when it is gone (if it is)."""

    pod: str
    gone_since: float | None = None


def ready_pods(items: list[dict[str, Any]]) -> dict[str, str]:
    """IP -> name of the Pods that are Ready, have an IP and are not being deleted."""
    found = {}
    for pod in items:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if meta.get("deletionTimestamp") or not status.get("podIP"):
            continue
        ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
        if ready and ready[0].get("status") == "True":
            found[str(status["podIP"])] = str(meta.get("name"))
    return found


def plan(state: Mapping[str, Serving], ready: Mapping[str, str] | None, now: float,
         grace: float) -> tuple[dict[str, Serving], list[str], list[str]]:
    """The next state, the IPs to start serving and the IPs to stop serving.

    ``ready`` None means the member's API server did not answer: nothing changes.
    A gone Pod's server stays ``grace`` seconds; an IP given to a new Pod in the
    meantime keeps its server and serves the new Pod.
    """
    if ready is None:
        return dict(state), [], []
    new: dict[str, Serving] = {}
    opened: list[str] = []
    closed: list[str] = []
    for ip, pod in sorted(ready.items()):
        new[ip] = Serving(pod)
        if ip not in state:
            opened.append(ip)
    for ip, serving in sorted(state.items()):
        if ip in ready:
            continue
        gone = serving.gone_since if serving.gone_since is not None else now
        if now - gone >= grace:
            closed.append(ip)
        else:
            new[ip] = Serving(serving.pod, gone)
    return new, opened, closed


class PodServers:
    """Serve one app's Ready Pods of one member, following them until :meth:`close`."""

    def __init__(self, member: str, client: Callable[[], kube.ApiClient], namespace: str,
                 selector: str, port: int, *, grace: float = 10.0, interval: float = 0.3,
                 listen: Callable[[str, int], socket.socket] | None = None,
                 clock: clocks.Clock | None = None) -> None:
        self.member = member
        self._client = client
        self.namespace = namespace
        self.selector = selector
        self.port = port
        self.grace = grace
        self.interval = interval
        self.listen = listen
        """Makes the listening socket for a Pod IP (default: this network namespace)."""
        self.clock = clock or clocks.Clock()
        self.state: dict[str, Serving] = {}
        self.backends: dict[str, httpload.Backend] = {}
        self.reachable = True
        """Whether the last poll reached the member's API server."""

    def serving(self) -> dict[str, str]:
        """IP -> the Pod served there (gone Pods in their grace period included)."""
        return {ip: s.pod for ip, s in self.state.items()}

    def ready(self) -> dict[str, str]:
        """IP -> the Pod served there, for the Pods that were Ready at the last poll."""
        return {ip: s.pod for ip, s in self.state.items() if s.gone_since is None}

    async def run(self) -> None:
        """Poll and follow until cancelled."""
        async with self._client() as api:
            while True:
                await self.poll(api)
                await self.clock.sleep(self.interval)

    async def poll(self, api: kube.ApiClient) -> None:
        """One round: list the Pods, then start and stop servers by :func:`plan`."""
        ready: dict[str, str] | None
        try:
            listing = await api.list(resources.PODS, namespace=self.namespace,
                                     label_selector=self.selector)
            ready = ready_pods(listing["items"])
            self.reachable = True
        except (errors.KubeError, OSError, TimeoutError):
            ready = None
            self.reachable = False
        state, opened, closed = plan(self.state, ready, self.clock.monotonic(), self.grace)
        for ip in closed:
            backend = self.backends.pop(ip, None)
            if backend is not None:
                await backend.close()
        for ip in opened:
            backend = httpload.Backend(f"{self.member}/{state[ip].pod}", self.member)
            try:
                if self.listen is None:
                    await backend.start(ip, self.port)
                else:
                    sock = await asyncio.to_thread(self.listen, ip, self.port)
                    await backend.start(sock=sock)
            except OSError as exc:  # an address still held by a closing server: next round
                log.warning("cannot serve pod %s at %s:%s: %s", state[ip].pod, ip, self.port,
                            exc)
                del state[ip]
                continue
            self.backends[ip] = backend
        for ip, serving in state.items():  # an IP kwok gave to a new Pod answers its name
            if ip in self.backends:
                self.backends[ip].name = f"{self.member}/{serving.pod}"
        self.state = state

    async def close(self) -> None:
        """Stop every server."""
        for backend in self.backends.values():
            with contextlib.suppress(Exception):
                await backend.close()
        self.backends.clear()
        self.state.clear()


async def run_all(servers: list[PodServers]) -> None:
    """Run several :class:`PodServers` until cancelled, then close them all."""
    tasks = [asyncio.create_task(s.run()) for s in servers]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for server in servers:
            await server.close()
