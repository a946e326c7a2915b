"""``make demo``: the local control plane and members, and a live view of their Clusters.

It starts the environment, gives every member two nodes with a detection
agent each (real processes, probing a real dnsmasq per member), prints which
clusters exist and their conditions, then follows every change of a Cluster
(conditions, remedy actions, taints) as one-line diffs.  The scripted
scenario stops member1's DNS server, waits for the agents to report
``ServiceDomainNameResolutionReady=False``, starts it again and waits for
``True``; then the demo keeps following until Ctrl-C or ``--duration``.
Components run as processes (``python -m ...``); this module imports none.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import os
import pathlib
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import dns, environment, processes

DNS_CONDITION = "ServiceDomainNameResolutionReady"
NODES_PER_MEMBER = 2
AGENT_FLAGS = (
    "--detect-period", "1s", "--detect-failure-threshold", "3s",
    "--detect-success-threshold", "3s", "--stale-threshold", "10s",
    "--node-heartbeat-period", "3s", "--report-period", "30s",
    "--leader-elect-lease-duration", "6s", "--leader-elect-renew-deadline", "4s",
    "--leader-elect-retry-period", "1s", "--leader-elect-resource-namespace", "default",
)
SOURCE_ROOTS = ("core", "agent", "remedy", "mci-provider", "controlplane")


def _stamp() -> str:
    return datetime.datetime.now().strftime("%H:%M:%S")


def say(text: str) -> None:
    """Print one line of the demo's story."""
    print(f"[{_stamp()}] {text}", flush=True)


def summary(cluster: Mapping[str, Any]) -> dict[str, str]:
    """What a person wants to see of a Cluster: conditions, actions, taints."""
    st = cluster.get("status") or {}
    view = {f"condition {c['type']}": f"{c['status']} ({c.get('reason', '')}: "
                                         f"{c.get('message', '')[:120]})"
            for c in st.get("conditions") or []}
    view["remedyActions"] = ",".join(st.get("remedyActions") or []) or "-"
    sources = st.get("remedyActionSources") or []
    view["remedy sources"] = "; ".join(
        f"{s.get('action')} from {','.join(s.get('remedies') or [])}" for s in sources) or "-"
    taints = (cluster.get("spec") or {}).get("taints") or []
    view["taints"] = ",".join(f"{t['key']}:{t['effect']}" for t in taints) or "-"
    return view


def diff(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Human-readable changes between two summaries."""
    lines = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key, "absent"), after.get(key, "absent")
        if old != new:
            # the old value's detail is on an earlier line already: keep the status
            lines.append(f"{key}: {old.split(' (', 1)[0]} -> {new}")
    return lines


async def print_table(api: kube.ApiClient) -> None:
    """Print the Clusters as ``kubectl get clusters`` would (server-side Table)."""
    table = await api.table(resources.CLUSTERS)
    columns = [c["name"] for c in table["columnDefinitions"] if c.get("priority", 0) == 0]
    rows = [[str(cell if cell not in (None, "") else "<none>") for cell in row["cells"]]
            for row in table["rows"]]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(columns)]
    print("  " + "  ".join(h.upper().ljust(w) for h, w in zip(columns, widths, strict=False)))
    for row in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)))


async def follow(api: kube.ApiClient) -> None:
    """Print every change of every Cluster, re-listing when the watch ends."""
    known: dict[str, dict[str, str]] = {}
    while True:
        listing = await api.list(resources.CLUSTERS)
        for item in listing["items"]:
            known.setdefault(item["metadata"]["name"], summary(item))
        try:
            async for event in api.watch(
                resources.CLUSTERS, resource_version=listing["metadata"]["resourceVersion"]
            ):
                if event.type == "BOOKMARK":
                    continue
                name = event.object["metadata"]["name"]
                if event.type == "DELETED":
                    say(f"cluster {name} deleted")
                    known.pop(name, None)
                    continue
                now = summary(event.object)
                for line in diff(known.get(name, {}), now):
                    say(f"cluster {name}: {line}")
                known[name] = now
        except (errors.Gone, errors.Unreachable):
            await asyncio.sleep(1)


@dataclasses.dataclass
class Member:
    """A member's demo fixtures: its DNS server and its agent processes."""

    name: str
    dns: dns.DnsServer
    agents: list[processes.ManagedProcess]


def _child_env() -> dict[str, str]:
    repo = pathlib.Path(__file__).resolve().parents[2]
    roots = os.pathsep.join(str(repo / root) for root in SOURCE_ROOTS)
    return {**os.environ, "PYTHONPATH": roots}


async def start_member(env: environment.LocalEnvironment, name: str) -> Member:
    """Two Ready nodes, a dnsmasq, and an agent per node."""
    server = dns.DnsServer("127.0.0.1", records={
        "kubernetes.default.svc.cluster.local": "10.96.0.1"},
        log_dir=env.workdir / "logs" / f"{name}-dns")
    await asyncio.to_thread(server.start)
    host, port = server.address
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    agents = []
    async with env.client(name) as api:
        for index in range(NODES_PER_MEMBER):
            node = f"{name}-node{index + 1}"
            await api.create(resources.NODES, {"metadata": {"name": node}})
            await api.patch(resources.NODES, node, {"status": {"conditions": [{
                "type": "Ready", "status": "True", "reason": "Demo",
                "message": "no kubelet in the demo: Ready set by hand",
                "lastHeartbeatTime": now, "lastTransitionTime": now}]}},
                subresource="status", patch_type="strategic")
            agent = processes.ManagedProcess(
                f"agent[{node}]",
                [sys.executable, "-m", "clusterhealth_agent",
                 "--kubeconfig", str(env.kubeconfig(name)),
                 "--karmada-kubeconfig", str(env.kubeconfig()),
                 "--cluster-name", name, "--host-name", node,
                 "--nameserver", f"{host}:{port}", "--bind-address", "127.0.0.1",
                 "--healthz-port", str(environment.free_port("127.0.0.1")), *AGENT_FLAGS],
                env.workdir / "logs" / f"agent-{node}.log", env=_child_env(),
            )
            agent.start()
            agents.append(agent)
    say(f"  {name}: nodes {', '.join(f'{name}-node{i + 1}' for i in range(NODES_PER_MEMBER))}"
        f", dnsmasq at {host}:{port}, {len(agents)} agents")
    return Member(name, server, agents)


DEMO_REMEDY = {
    "apiVersion": resources.REMEDIES.api_version, "kind": "Remedy",
    "metadata": {"name": "dns-failure"},
    "spec": {"decisionMatches": [{"clusterConditionMatch": {
        "conditionType": DNS_CONDITION, "operator": "Equal", "conditionStatus": "False"}}],
        "actions": ["TrafficControl"]},
}


def start_remedy_controller(env: environment.LocalEnvironment) -> processes.ManagedProcess:
    """The Remedy controller, as a process against the control plane."""
    controller = processes.ManagedProcess(
        "remedy-controller",
        [sys.executable, "-m", "clusterhealth_remedy", "--kubeconfig", str(env.kubeconfig()),
         "--leader-elect", "false", "--bind-address", "127.0.0.1", "--healthz-port", "0"],
        env.workdir / "logs" / "remedy-controller.log", env=_child_env(),
    )
    controller.start()
    return controller


async def wait_actions(api: kube.ApiClient, cluster: str, wanted: list[str],
                       timeout: float) -> bool:
    """Wait until ``cluster``'s remedyActions are ``wanted``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(errors.KubeError):
            obj = await api.get(resources.CLUSTERS, cluster)
            if list((obj.get("status") or {}).get("remedyActions") or []) == wanted:
                return True
        await asyncio.sleep(0.5)
    return False


async def wait_dns(api: kube.ApiClient, cluster: str, status: str, timeout: float) -> bool:
    """Wait until ``cluster`` reports the DNS condition ``status``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(errors.KubeError):
            obj = await api.get(resources.CLUSTERS, cluster)
            for cond in (obj.get("status") or {}).get("conditions") or []:
                if cond["type"] == DNS_CONDITION and cond["status"] == status:
                    return True
        await asyncio.sleep(0.5)
    return False


async def scenario(api: kube.ApiClient, members: Sequence[Member]) -> None:
    """Break member1's DNS, watch it detected; repair it, watch it cleared."""
    say("waiting for every member's agents to report DNS healthy")
    for member in members:
        if not await wait_dns(api, member.name, "True", 60):
            say(f"!! {member.name} did not report {DNS_CONDITION}=True (see the agent logs)")
            return
    victim = members[0]
    say(f">>> stopping {victim.name}'s DNS server (the agents need 3 s of failures to agree)")
    await asyncio.to_thread(victim.dns.stop)
    if await wait_dns(api, victim.name, "False", 60):
        say(f">>> {victim.name}: DNS failure detected")
    if await wait_actions(api, victim.name, ["TrafficControl"], 30):
        say(f">>> {victim.name}: Remedy dns-failure added TrafficControl; "
            "starting the DNS server again")
    await asyncio.to_thread(victim.dns.start)
    if await wait_dns(api, victim.name, "True", 60):
        say(f">>> {victim.name}: DNS healthy again")
    if await wait_actions(api, victim.name, [], 30):
        say(f">>> {victim.name}: TrafficControl cleared")


async def run(args: argparse.Namespace) -> int:
    """Start the environment and the agents, show them, run the scenario, follow."""
    names = [f"member{i + 1}" for i in range(args.members)]
    say(f"starting a control plane and {len(names)} member clusters on real kube-apiservers")
    env = environment.LocalEnvironment(environment.EnvironmentConfig(members=names))
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    members: list[Member] = []
    controllers: list[processes.ManagedProcess] = []
    async with env:
        for name, server in env.servers.items():
            say(f"  {name:<14} {server.url}   kubeconfig {server.kubeconfig}")
        say("starting detection agents (logs in " f"{env.workdir / 'logs'})")
        try:
            for name in names:
                members.append(await start_member(env, name))
            controllers.append(start_remedy_controller(env))
            async with env.client() as api:
                await api.create(resources.REMEDIES, DEMO_REMEDY)
                say("Remedy dns-failure: ServiceDomainNameResolutionReady Equal False -> "
                    "TrafficControl, on every cluster (Remedy controller running)")
                say("Clusters registered in the control plane:")
                await print_table(api)
                say("following Cluster changes (Ctrl-C to stop)")
                follower = asyncio.create_task(follow(api))
                if not args.no_scenario:
                    play = asyncio.create_task(scenario(api, members))
                    await asyncio.wait({play, asyncio.create_task(stop.wait())},
                                       return_when=asyncio.FIRST_COMPLETED)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(args.duration):
                        await stop.wait()
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower
                say("final state:")
                await print_table(api)
        finally:
            await asyncio.gather(*(controller.stop() for controller in controllers))
            for member in members:
                await asyncio.gather(*(agent.stop() for agent in member.agents))
                await asyncio.to_thread(member.dns.stop)
    say("environment stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m clusterhealth_localenv.demo``."""
    parser = argparse.ArgumentParser(prog="clusterhealth-demo", description=__doc__)
    parser.add_argument("--members", type=int, default=2, help="number of member clusters")
    parser.add_argument("--duration", type=float, default=None,
                        help="after the scenario, follow this many seconds (default: until "
                             "Ctrl-C)")
    parser.add_argument("--no-scenario", action="store_true",
                        help="do not break and repair member1's DNS")
    args = parser.parse_args(argv)
    try:
        return asyncio.run(run(args))
    except environment.StartError as exc:
        print(f"clusterhealth-demo: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
