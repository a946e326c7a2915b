"""End-to-end agent test kit: fake nodes, real DNS servers, agent processes.

Nodes are real ``Node`` objects in the member API server (there is no
kubelet, so the test sets their Ready condition); each node gets its own
dnsmasq; each agent is a real ``python -m clusterhealth_agent`` process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import signal
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from typing import Any

import testkit
from clusterhealth_agent import reporter
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import dns, environment

MEMBER = "member2"
DNS_CONDITION = "ServiceDomainNameResolutionReady"
FIELD_MANAGER = reporter.FIELD_MANAGER
FAST = [
    "--detect-period", "0.5s", "--detect-failure-threshold", "2s",
    "--detect-success-threshold", "2s", "--stale-threshold", "5s",
    "--node-heartbeat-period", "1s", "--report-period", "3s",
    "--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
    "--leader-elect-retry-period", "0.5s",
]


@dataclasses.dataclass
class AgentProcess:
    node: str
    port: int
    proc: subprocess.Popen[bytes]
    log: pathlib.Path

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
            return str(r.read().decode())

    def sample(self, name: str) -> float | None:
        try:
            text = self.metrics()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        return None

    def is_leader(self) -> bool:
        return self.sample("clusterhealth_agent_is_leader") == 1.0

    def stop(self, sig: int = signal.SIGTERM) -> None:
        testkit.stop_process(self.proc, sig)


@dataclasses.dataclass
class Fleet:
    """A member cluster's nodes, their DNS servers and agents."""

    env: environment.LocalEnvironment
    nodes: list[str]
    servers: dict[str, dns.DnsServer]
    agents: dict[str, AgentProcess]
    python: str
    python_env: dict[str, str]
    tmp: pathlib.Path

    def start_agent(self, node: str, extra: Sequence[str] = ()) -> AgentProcess:
        port = environment.free_port("127.0.0.1")
        host, dns_port = self.servers[node].address
        log = self.tmp / f"agent-{node}.log"
        argv = [
            self.python, "-m", "clusterhealth_agent",
            "--kubeconfig", str(self.env.kubeconfig(MEMBER)),
            "--karmada-kubeconfig", str(self.env.kubeconfig()),
            "--cluster-name", MEMBER, "--host-name", node,
            "--nameserver", f"{host}:{dns_port}",
            "--bind-address", "127.0.0.1", "--healthz-port", str(port),
            "--leader-elect-resource-namespace", "default",
            "--leader-elect-resource-name", f"agent-{self.nodes[0]}",
            *FAST, *extra,
        ]
        with log.open("ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    env=self.python_env)
        agent = AgentProcess(node, port, proc, log)
        self.agents[node] = agent
        return agent

    def leaders(self) -> list[AgentProcess]:
        return [a for a in self.agents.values() if a.proc.poll() is None and a.is_leader()]


async def set_node_ready(api: kube.ApiClient, name: str, ready: bool = True) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    await api.patch(resources.NODES, name, {"status": {"conditions": [{
        "type": "Ready", "status": "True" if ready else "False", "reason": "Test",
        "message": "set by the test", "lastHeartbeatTime": now, "lastTransitionTime": now,
    }]}}, subresource="status", patch_type="strategic")


async def cluster_condition(cp: kube.ApiClient, ctype: str = DNS_CONDITION
                            ) -> dict[str, Any] | None:
    obj = await cp.get(resources.CLUSTERS, MEMBER)
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == ctype:
            return dict(cond)
    return None


async def wait_condition(cp: kube.ApiClient, status: str, timeout: float,
                         ctype: str = DNS_CONDITION) -> tuple[dict[str, Any], float]:
    """Wait until the member's condition has ``status``; return it and when it was seen."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        with contextlib.suppress(errors.KubeError):  # the control plane may be restarting
            last = await cluster_condition(cp, ctype)
            if last is not None and last["status"] == status:
                return last, time.monotonic()
        await asyncio.sleep(0.1)
    raise AssertionError(f"{ctype} not {status} within {timeout}s; last: {last}")
