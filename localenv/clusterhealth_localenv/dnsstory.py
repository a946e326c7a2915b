"""The DNS story on real Pods: member1's CoreDNS scaled to zero, and back, under traffic.

On a fleet installed by :mod:`.fleet` (the charts, the ``shop`` application in both
members, its MCI and the Remedy ``dns-down``), with requests flowing from this
machine through one MCI provider Pod's HAProxy sidecar to the ``web`` Pods of both
members:

1. member1's CoreDNS is scaled to 0 (``kubectl scale``): every Pod of member1 loses
   DNS; the agent DaemonSet's Pods fail their probe and write it on their Nodes;
2. the agents' leader reports ``ServiceDomainNameResolutionReady=False`` on the
   Cluster; the remedy controller adds ``TrafficControl``; the MCI provider lists
   member1 in ``trafficBlockClusters`` and drains its servers in every HAProxy;
3. CoreDNS is scaled back: each step is undone, member1 answers again.

Every step is a milestone with its time (a :class:`.demoview.Phase`); the traffic
(:class:`.httpload.Traffic`) records every answer and failure.  The tests
(``tests/install``) assert on it; the demo on real Nodes
(``python -m clusterhealth_localenv.demo --real-nodes``) prints it as it happens.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from clusterhealth_core.kube import resources
from clusterhealth_localenv import coredns, demoview, fleet, httpload

MEMBERS = ("member1", "member2")
HAPROXY_QUERY = (
    "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
    "s.sendall(b'show stat\\n'); print(b''.join(iter(lambda: s.recv(65536), b'')).decode())")
"""Run in the MCI provider's container, beside HAProxy's admin socket (no socat there)."""


def _quiet(_: str) -> None:
    pass


class DnsStory:
    """The story on ``the_fleet``; ``say`` prints each milestone as it happens."""

    def __init__(self, the_fleet: fleet.Fleet, say: Callable[[str], None] = _quiet,
                 wait: float = 120.0, clients: int = 4) -> None:
        self.fleet = the_fleet
        self.say = say
        self.wait_limit = wait
        self.clients = clients
        self.traffic: httpload.Traffic | None = None
        self.haproxy_pod: dict[str, Any] = {}
        self.phase: demoview.Phase | None = None
        self._from = (0, 0)

    @property
    def pod_ranges(self) -> dict[str, str]:
        """Each member's Pod range (who answered, from HAProxy's server addresses)."""
        env = self.fleet.env
        assert env.node_env is not None
        plan = env.node_env.plan
        return {m: plan.pod_range(env.node_env.indexes[m]) for m in MEMBERS}

    async def start_traffic(self) -> None:
        """Requests through a Ready MCI provider Pod's HAProxy until both members answered.

        The Pod is one not being deleted (an earlier test may have deleted one).

        They start once that HAProxy sends to servers of both members (right after the
        install the MCI provider may not have written them yet: HAProxy answers 503).
        """
        async def ready_pod() -> dict[str, Any] | None:
            pods = await self.fleet.haproxy_pods()
            return pods[0] if pods and fleet.pod_ready(pods[0]) else None
        self.haproxy_pod = await self.until("a Ready MCI provider Pod", ready_pod)

        async def serving() -> bool:
            states = await self.haproxy_states()
            return all(demoview.taking_traffic(states, m) > 0 for m in MEMBERS)
        await self.until("HAProxy sending to both members", serving)
        self.traffic = httpload.Traffic(
            port=fleet.WEB_PORT, host=fleet.WEB_HOST, path=fleet.WEB_PATH,
            address=self.haproxy_pod["status"]["podIP"], clients=self.clients)
        self.traffic.start()
        await self.until("both members answering", lambda: self._answering(MEMBERS))

    async def stop_traffic(self) -> None:
        if self.traffic is not None:
            await self.traffic.stop()

    async def _answering(self, clusters: tuple[str, ...], since: float = 0.0) -> bool:
        assert self.traffic is not None
        counts = demoview.answers_by_cluster(
            [(t, b) for t, b in self.traffic.answers if t >= since], MEMBERS)
        return all(counts[c] > 0 for c in clusters)

    async def until(self, what: str, check: Callable[[], Awaitable[Any]]) -> Any:
        """``check()``'s first truthy result; an error naming ``what`` after the limit."""
        deadline = time.monotonic() + self.wait_limit
        while True:
            result = await check()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {self.wait_limit:.0f} s")
            await asyncio.sleep(0.25)

    def mark(self, what: str) -> None:
        assert self.phase is not None
        at = self.phase.mark(time.monotonic(), what)
        self.say(f"  +{at:5.1f} s  {what}")

    async def haproxy_rows(self) -> list[dict[str, str]]:
        """``show stat`` of the traffic's HAProxy, one row per proxy and server."""
        pod = self.haproxy_pod["metadata"]["name"]
        ran = await self.fleet.kubectl(
            "control-plane", "-n", fleet.NAMESPACE, "exec", pod, "-c", "mci-provider", "--",
            "python", "-c", HAPROXY_QUERY, "/var/run/haproxy/admin.sock", timeout=30)
        return demoview.parse_stat(ran.stdout)

    async def haproxy_states(self) -> dict[str, Counter[str]]:
        """Per member, its servers in the traffic's HAProxy by state."""
        return demoview.servers_by_cluster(await self.haproxy_rows(), self.pod_ranges)

    async def _cluster(self, name: str) -> dict[str, Any]:
        async with self.fleet.env.client() as api:
            return await api.get(resources.CLUSTERS, name)

    async def _dns(self, status: str) -> bool:
        return demoview.condition_status(await self._cluster("member1"),
                                         fleet.DNS_CONDITION) == status

    async def _actions(self, wanted: list[str]) -> bool:
        cluster = await self._cluster("member1")
        return list((cluster.get("status") or {}).get("remedyActions") or []) == wanted

    async def _blocked(self, wanted: list[str]) -> bool:
        async with self.fleet.env.client() as api:
            mci = await api.get(resources.MULTI_CLUSTER_INGRESSES, "web", namespace=fleet.SHOP)
        return sorted((mci.get("status") or {}).get("trafficBlockClusters") or []) == wanted

    async def _nodes_failing(self, failing: bool) -> bool:
        """Every member1 Node's DNS condition, as its agent Pod wrote it."""
        async with self.fleet.env.client("member1") as api:
            nodes = (await api.list(resources.NODES))["items"]
        wanted = "False" if failing else "True"
        return bool(nodes) and all(
            (demoview.condition_status(n, fleet.DNS_CONDITION) == wanted) for n in nodes)

    async def scale_coredns(self, replicas: int) -> None:
        """``kubectl scale`` member1's CoreDNS, as an operator (or an accident) would."""
        await self.fleet.kubectl("member1", "-n", coredns.NAMESPACE, "scale", "deployment",
                                 coredns.DEPLOYMENT, f"--replicas={replicas}")

    async def run(self) -> demoview.Phase:
        """The whole story (traffic started); the phase with its milestones and traffic."""
        assert self.traffic is not None
        self.phase = demoview.Phase(1, "member1's CoreDNS scaled to 0, then back",
                                    time.monotonic())
        self._from = (len(self.traffic.answers), len(self.traffic.failures))
        await self.scale_coredns(0)
        self.mark("member1: CoreDNS scaled to 0 (every Pod of member1 loses DNS)")
        await self.until("member1's agents failing their probe",
                         lambda: self._nodes_failing(True))
        self.mark(f"member1: every agent Pod failed its probe ({fleet.DNS_CONDITION} False "
                  "on each Node)")
        await self.until("member1 reported failing", lambda: self._dns("False"))
        self.mark(f"member1: {fleet.DNS_CONDITION} False on the Cluster (the agents' leader)")
        await self.until("TrafficControl on member1", lambda: self._actions(["TrafficControl"]))
        self.mark("member1: remedyActions [TrafficControl] (Remedy dns-down)")
        await self.until("the MCI blocking member1", lambda: self._blocked(["member1"]))
        self.mark("MultiClusterIngress: trafficBlockClusters [member1] (the MCI provider)")

        async def drained() -> bool:
            states = await self.haproxy_states()
            return demoview.taking_traffic(states, "member1") == 0 and \
                demoview.taking_traffic(states, "member2") > 0
        await self.until("HAProxy draining member1", drained)
        at = time.monotonic()
        self.mark("HAProxy (the Pod's sidecar): member1's servers drained, member2's up")
        await asyncio.sleep(5.0)
        self.mark(f"requests sent in the 5 s since: member2 answered "
                  f"{self.answered_since('member2', at)}, member1 "
                  f"{self.answered_since('member1', at)}")
        await self.scale_coredns(2)
        self.mark("member1: CoreDNS scaled back to 2")
        await self.until("member1's agents passing again", lambda: self._nodes_failing(False))
        await self.until("member1 reported healthy", lambda: self._dns("True"))
        self.mark(f"member1: {fleet.DNS_CONDITION} True")
        await self.until("TrafficControl cleared", lambda: self._actions([]))
        self.mark("member1: remedyActions [] (TrafficControl cleared)")
        await self.until("the MCI unblocking member1", lambda: self._blocked([]))
        self.mark("MultiClusterIngress: trafficBlockClusters []")
        back = time.monotonic()
        await self.until("member1 answering again",
                         lambda: self._answering(("member1",), since=back))
        self.mark("traffic returns to both members")
        self.phase.ended = time.monotonic()
        self.tally()
        return self.phase

    def answered_since(self, cluster: str, since: float) -> int:
        """Answers by ``cluster`` to requests sent after ``since``."""
        assert self.traffic is not None
        return sum(1 for t, b in self.traffic.answers
                   if t >= since and demoview.cluster_of_backend(b) == cluster)

    def tally(self) -> None:
        """The phase's traffic so far."""
        assert self.traffic is not None
        assert self.phase is not None
        answers, failures = self._from
        self.phase.answered = demoview.answers_by_cluster(self.traffic.answers[answers:],
                                                          MEMBERS)
        self.phase.failed = list(self.traffic.failures[failures:])
