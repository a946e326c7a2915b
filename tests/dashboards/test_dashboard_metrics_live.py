"""Every metric the dashboards and alert rules use is exported by a running component.

The components run as shipped (``python -m ...``, one process each) against a
local environment of this module's own (they write members' Cluster
conditions, remedy actions and Works): the agent on a node of member2 whose
DNS server knows no name, the Remedy controller with a Remedy acting on that,
the MCI provider (fake load balancer) with an MCI over both members, the
controller manager with every controller, and the scheduler.  Their
``/metrics`` are scraped and the series names compared with the names the
shipped files use (:func:`dashkit.missing`: a renamed metric fails here).

Before comparing, the test waits until the chain the dashboards show has
happened (DNS failing, the condition False, TrafficControl from the Remedy,
the cluster blocked in the MCI, a binding scheduled), so the key panels'
series have samples, not only the ``# TYPE`` line that a labelled family
without samples has.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pathlib
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator

import dashkit
import pytest
from prometheus_client import parser

from clusterhealth_core.kube import resources
from clusterhealth_localenv import dns, environment, processes, waiting

MEMBER = "member2"
NODE = "dashboard-node"
DNS_CONDITION = "ServiceDomainNameResolutionReady"
REMEDY = "dashboards-dns"
NAMESPACE = "dashboards"
PYTHONPATH = os.pathsep.join(str(dashkit.ROOT / p) for p in
                             ("core", "agent", "remedy", "mci-provider", "controlplane"))
FAST_AGENT = ["--detect-period", "0.5s", "--detect-failure-threshold", "1s",
              "--detect-success-threshold", "1s", "--stale-threshold", "5s",
              "--node-heartbeat-period", "1s", "--report-period", "2s"]


@dataclasses.dataclass
class Component:
    name: str
    process: processes.ManagedProcess
    port: int

    def exposition(self) -> str:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return str(answer.read().decode())

    def sample(self, name: str, **labels: str) -> float | None:
        for family in parser.text_string_to_metric_families(self.exposition()):
            for sample in family.samples:
                if sample.name == name and labels.items() <= sample.labels.items():
                    return float(sample.value)
        return None


@dataclasses.dataclass
class Stack:
    components: dict[str, Component]
    mci: str
    """The MCI's key in the MCI provider's metrics (namespace/name)."""


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[environment.LocalEnvironment]:
    """Members of its own: the components write Cluster conditions, actions and taints."""
    config = environment.EnvironmentConfig(members=("member1", MEMBER))
    async with environment.LocalEnvironment(config) as local:
        yield local


def _start(name: str, argv: list[str], workdir: pathlib.Path) -> Component:
    port = environment.free_port("127.0.0.1")
    process = processes.ManagedProcess(
        name, [sys.executable, "-m", *argv, "--bind-address", "127.0.0.1",
               "--healthz-port", str(port)],
        workdir / f"{name}.log", env={**os.environ, "PYTHONPATH": PYTHONPATH})
    process.start()
    return Component(name, process, port)


async def _objects(env: environment.LocalEnvironment, mci: str, service: str) -> None:
    """The Node the agent probes, the Remedy, the MCI over both members, a propagated
    Deployment (something to schedule)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    async with env.client(MEMBER) as member:
        await member.create(resources.NODES, {"metadata": {"name": NODE}})
        await member.patch(resources.NODES, NODE, {"status": {"conditions": [{
            "type": "Ready", "status": "True", "reason": "Test", "message": "set by the test",
            "lastHeartbeatTime": now, "lastTransitionTime": now}]}},
            subresource="status", patch_type="strategic")
    for index, name in enumerate(env.members, start=11):
        async with env.client(name) as member:
            await member.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
            await member.create(resources.SERVICES, {
                "metadata": {"name": service, "namespace": NAMESPACE},
                "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}},
                namespace=NAMESPACE)
            await member.create(resources.ENDPOINT_SLICES, {
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": f"{service}-1", "namespace": NAMESPACE,
                             "labels": {"kubernetes.io/service-name": service}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                "endpoints": [{"addresses": [f"192.0.2.{index}"], "conditions": {"ready": True}}],
            }, namespace=NAMESPACE)
    async with env.client() as cp:
        await cp.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
        await cp.create(resources.REMEDIES, {
            "apiVersion": resources.REMEDIES.api_version, "kind": "Remedy",
            "metadata": {"name": REMEDY},
            "spec": {"clusterAffinity": {"clusterNames": [MEMBER]}, "actions": ["TrafficControl"],
                     "decisionMatches": [{"clusterConditionMatch": {
                         "conditionType": DNS_CONDITION, "operator": "Equal",
                         "conditionStatus": "False"}}]}})
        await cp.create(resources.MULTI_CLUSTER_INGRESSES, {
            "apiVersion": resources.MULTI_CLUSTER_INGRESSES.api_version,
            "kind": "MultiClusterIngress", "metadata": {"name": mci, "namespace": NAMESPACE},
            "spec": {"rules": [{"host": "dashboards.example.org", "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": service, "port": {"number": 80}}}}]}}]}},
            namespace=NAMESPACE)
        labels = {"app": service}
        await cp.create(resources.DEPLOYMENTS, {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": service, "namespace": NAMESPACE},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "web", "image": "nginx:1.27"}]}}}}, namespace=NAMESPACE)
        await cp.create(resources.PROPAGATION_POLICIES, {
            "apiVersion": resources.PROPAGATION_POLICIES.api_version,
            "kind": "PropagationPolicy", "metadata": {"name": service, "namespace": NAMESPACE},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": service}],
                     "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}},
            namespace=NAMESPACE)


@pytest.fixture(scope="module")
async def stack(env: environment.LocalEnvironment, tmp_path_factory: pytest.TempPathFactory
                ) -> AsyncIterator[Stack]:
    workdir = tmp_path_factory.mktemp("dashboards")
    mci, service = f"web-{uuid.uuid4().hex[:6]}", "web"
    await _objects(env, mci, service)
    server = dns.DnsServer("127.0.0.1", records={}, log_dir=workdir)  # knows no name
    await asyncio.to_thread(server.start)
    host, port = server.address
    cp = str(env.kubeconfig())
    started = [
        _start("agent", ["clusterhealth_agent", "--kubeconfig", str(env.kubeconfig(MEMBER)),
                         "--karmada-kubeconfig", cp, "--cluster-name", MEMBER,
                         "--host-name", NODE, "--nameserver", f"{host}:{port}",
                         "--leader-elect-resource-namespace", "default",
                         "--leader-elect-resource-name", "dashboards-agent", *FAST_AGENT],
               workdir),
        _start("remedy", ["clusterhealth_remedy", "--kubeconfig", cp, "--leader-elect", "false"],
               workdir),
        _start("mci", ["clusterhealth_mci", "--kubeconfig", cp, "--leader-elect", "false",
                       "--provider", "fake", "--drain-timeout", "1s"], workdir),
        _start("controlplane", ["clusterhealth_controlplane", "--kubeconfig", cp,
                                "--leader-elect", "false",
                                "--cluster-status-update-frequency", "1s"], workdir),
        _start("scheduler", ["clusterhealth_controlplane.scheduler", "--kubeconfig", cp,
                             "--leader-elect", "false"], workdir),
    ]
    try:
        for component in started:
            await processes.wait_answering(
                component.process, f"http://127.0.0.1:{component.port}/metrics", None, 60)
        yield Stack({c.name: c for c in started}, f"{NAMESPACE}/{mci}")
    finally:
        await asyncio.gather(*(c.process.stop() for c in started))
        await asyncio.to_thread(server.stop)


async def _sampled(component: Component, name: str, **labels: str) -> bool:
    value = await asyncio.to_thread(component.sample, name, **labels)
    return value is not None and value > 0


@pytest.mark.parametrize(("component", "name", "labels"), [
    # detection: the DNS probe fails on the node, the leader reports the condition False
    ("agent", "clusterhealth_agent_probe_results_total", {"outcome": "failure"}),
    ("agent", "clusterhealth_agent_dns_rcode_total", {"rcode": "NXDOMAIN"}),
    ("agent", "clusterhealth_agent_node_condition",
     {"node": NODE, "condition": DNS_CONDITION, "status": "False"}),
    ("agent", "clusterhealth_agent_cluster_condition",
     {"cluster": MEMBER, "condition": DNS_CONDITION, "status": "False"}),
    ("agent", "clusterhealth_agent_info", {"cluster": MEMBER, "node": NODE}),
    # remedies: TrafficControl on member2, and which Remedy wants it
    ("remedy", "clusterhealth_remedy_active_actions",
     {"cluster": MEMBER, "action": "TrafficControl"}),
    ("remedy", "clusterhealth_remedy_action_sources",
     {"cluster": MEMBER, "action": "TrafficControl", "remedy": REMEDY}),
    # traffic: member2 blocked in the MCI, member1's backend still serving
    ("mci", "clusterhealth_mci_blocked_clusters", {}),
    ("mci", "clusterhealth_mci_backends", {"cluster": "member1"}),
    # control plane: members Ready, a binding scheduled
    ("controlplane", "clusterhealth_cluster_ready", {"cluster": "member1", "status": "True"}),
    ("controlplane", "clusterhealth_cluster_health_probes_total", {"result": "ok"}),
    ("scheduler", "clusterhealth_scheduler_e2e_scheduling_duration_seconds_count",
     {"result": "scheduled"}),
])
async def test_the_chain_the_dashboards_show_has_samples(
        stack: Stack, component: str, name: str, labels: dict[str, str]) -> None:
    running = stack.components[component]
    if component == "mci":
        labels = {**labels, "mci": stack.mci}
    try:
        await waiting.eventually(lambda: _sampled(running, name, **labels), timeout=60)
    except AssertionError:
        raise AssertionError(f"{component} never exported {name}{labels} > 0:\n"
                             f"{running.process.log_tail()}") from None


async def test_every_metric_the_dashboards_and_alerts_use_is_exported(stack: Stack) -> None:
    exported: dict[str, set[str]] = {}
    for name in ("agent", "remedy", "mci", "controlplane", "scheduler"):
        text = await asyncio.to_thread(stack.components[name].exposition)
        exported[name] = dashkit.exported_names(text)
        assert exported[name], f"{name} exports nothing"
    used = dashkit.used_names(dashkit.all_expressions())
    assert len(used) > 30  # the files were read
    not_exported = dashkit.missing(used, set().union(*exported.values()))
    assert not_exported == {}, (
        "metrics used by the dashboards or alert rules that no running component exports "
        f"(renamed? removed?): {not_exported}")


COMPONENT_LABELS = {"agent": "agent", "remedy": "remedy", "mci": "mci-provider",
                    "controlplane": "controlplane", "scheduler": "scheduler"}


async def test_every_component_says_what_it_is_and_who_leads(stack: Stack) -> None:
    """Build info, process series, ``clusterhealth_leader{component}``, and no ``_created``."""
    for name, component in COMPONENT_LABELS.items():
        running = stack.components[name]

        async def leads(running: Component = running, component: str = component) -> bool:
            value = await asyncio.to_thread(running.sample, "clusterhealth_leader",
                                            component=component)
            return value == 1.0
        await waiting.eventually(leads, timeout=60)
        text = await asyncio.to_thread(running.exposition)
        names = dashkit.exported_names(text)
        assert {"clusterhealth_build_info", "process_resident_memory_bytes",
                "process_cpu_seconds_total", "python_info"} <= names, name
        info = running.sample("clusterhealth_build_info", component=component)
        assert info == 1.0, name
        assert "_created" not in text, f"{name} exports _created series"
