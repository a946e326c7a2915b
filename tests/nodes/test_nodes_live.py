"""Clusters whose Nodes run containers: Nodes, Pods, DNS, Services, a kubelet stopped (real parts).

``node_env``'s member1 has two Nodes, each with kubelet, containerd, runc, a
CNI bridge and kube-proxy in namespaces of its own, and CoreDNS installed as
kubeadm installs it (:mod:`clusterhealth_localenv.nodes`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import subprocess
import time

import nodekit
import pytest

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import binaries, coredns, environment, folderimages, nodenet

MEMBER = nodekit.MEMBER
NAMESPACE = nodekit.NAMESPACE


async def test_nodes_are_ready_and_run_containerd(
        node_env: environment.LocalEnvironment) -> None:
    cluster = node_env.node_cluster(MEMBER)
    async with node_env.client(MEMBER) as api:
        nodes = (await api.list(resources.NODES))["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == ["member1-node-0", "member1-node-1"]
    for node in nodes:
        status = node["status"]
        ready = [c for c in status["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True", ready
        info = status["nodeInfo"]
        assert info["kubeletVersion"] == binaries.KUBERNETES_VERSION
        assert info["containerRuntimeVersion"].startswith("containerd://")
        address = [a["address"] for a in status["addresses"] if a["type"] == "InternalIP"]
        assert address == [cluster.node(node["metadata"]["name"]).ip]
        assert ipaddress.ip_address(address[0]) in ipaddress.ip_network("198.18.64.0/18")


async def test_each_node_keeps_its_rules_and_bridge_to_itself(
        node_env: environment.LocalEnvironment) -> None:
    """kube-proxy's nftables table and the CNI bridge are in each Node, not on this machine."""
    cluster = node_env.node_cluster(MEMBER)
    dns = cluster.plan.dns_service(cluster.index)
    rule = re.compile(rf"{re.escape(dns)} \. (udp|17) \. 53 :")
    for node in cluster.nodes:
        pid = node.init_pid
        assert pid is not None

        async def programmed(pid: int = pid) -> str | None:
            # kube-proxy programs the DNS Service's rule once it has seen the
            # Service and its EndpointSlice: the table may exist before it.
            table = await asyncio.to_thread(nodenet.in_namespace, pid,
                                            "nft", "list", "table", "ip", "kube-proxy")
            return table if "map service-ips" in table and rule.search(table) else None

        # (no table yet is "not yet" too)
        await testkit.eventually(programmed, timeout=60.0,
                                 what=f"kube-proxy's rule for the DNS Service {dns} in {node.name}",
                                 not_yet=(nodenet.NodeNetworkError,))
        links = await asyncio.to_thread(nodenet.in_namespace, pid,
                                        "ip", "-o", "link", "show")
        assert " cni0:" in links
    here = (await asyncio.to_thread(subprocess.run, ["nft", "list", "tables"],
                                    capture_output=True, text=True, check=True)).stdout
    assert "kube-proxy" not in here


async def test_coredns_is_installed_as_kubeadm_installs_it(
        node_env: environment.LocalEnvironment) -> None:
    cluster = node_env.node_cluster(MEMBER)
    async with node_env.client(MEMBER) as api:
        service = await api.get(resources.SERVICES, coredns.SERVICE, namespace="kube-system")
        deployment = await api.get(resources.DEPLOYMENTS, coredns.DEPLOYMENT,
                                   namespace="kube-system")
        pods = (await api.list(resources.PODS, namespace="kube-system",
                               label_selector="k8s-app=kube-dns"))["items"]
    assert service["spec"]["clusterIP"] == cluster.plan.dns_service(cluster.index)
    assert deployment["status"]["availableReplicas"] == 2
    # kubeadm's anti-affinity spreads the two replicas over the two Nodes.
    assert sorted(p["spec"]["nodeName"] for p in pods) == cluster.node_names
    for pod in pods:
        assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(
            cluster.plan.pod_range(cluster.index))


async def test_a_pod_runs_a_locally_built_image(
        node_env: environment.LocalEnvironment, busybox: folderimages.Image,
        pods: nodekit.Pods, toolboxes: dict[str, str]) -> None:
    del toolboxes  # the namespace and its ServiceAccount
    async with node_env.client(MEMBER) as api:
        await api.create(resources.PODS, nodekit.pod(
            "hello", NAMESPACE, "echo hello from $(hostname); sleep 100000"),
            namespace=NAMESPACE)
        try:
            running = await nodekit.wait_running(api, "hello", NAMESPACE)
            status = running["status"]["containerStatuses"][0]
            assert status["image"].endswith(busybox.reference.split("/", 1)[1])
            assert status["imageID"].endswith(busybox.image_id.removeprefix("sha256:")) or \
                status["imageID"].startswith("sha256:")
            assert "hello from hello" in await pods.logs("hello")
            result = await pods.exec("hello", "cat", "/var/run/secrets/kubernetes.io/"
                                     "serviceaccount/namespace")
            assert (result.code, result.output) == (0, NAMESPACE)
        finally:
            await api.delete(resources.PODS, "hello", namespace=NAMESPACE, missing_ok=True)


async def resolved(pods: nodekit.Pods, pod: str, name: str) -> str | None:
    """The address the Pod's C library finds for ``name`` (search path and ndots applied).

    busybox's ``nslookup`` sends the name as it is; ``ping`` resolves as programs do
    (``getaddrinfo``) and names the address before it sends (the ClusterIP never
    answers a ping: the address is what is looked at).
    """
    result = await pods.exec(pod, "ping", "-c", "1", "-W", "1", name)
    match = re.search(rf"^PING {re.escape(name)} \(([0-9.]+)\)", result.output, re.MULTILINE)
    return match.group(1) if match else None


async def looked_up(pods: nodekit.Pods, pod: str, name: str) -> str:
    """``nslookup name``: the DNS answer straight from the Pod's nameserver, or the error."""
    return (await pods.exec(pod, "nslookup", name)).output


def answers(output: str, address: str) -> bool:
    """Whether ``nslookup``'s output has ``address`` as an answer."""
    return re.search(rf"^Address: {re.escape(address)}$", output, re.MULTILINE) is not None


async def test_a_pod_resolves_kubernetes_default_through_coredns(
        node_env: environment.LocalEnvironment, pods: nodekit.Pods,
        toolboxes: dict[str, str]) -> None:
    cluster = node_env.node_cluster(MEMBER)
    kubernetes = cluster.plan.kubernetes_service(cluster.index)
    dns = cluster.plan.dns_service(cluster.index)
    for pod in toolboxes.values():
        resolv = (await pods.exec(pod, "cat", "/etc/resolv.conf")).output
        assert f"nameserver {dns}" in resolv
        assert f"search {NAMESPACE}.svc.cluster.local svc.cluster.local cluster.local" in resolv
        assert await resolved(pods, pod, "kubernetes.default") == kubernetes
        answer = await looked_up(pods, pod, "kubernetes.default.svc.cluster.local")
        assert f"Server:\t\t{dns}" in answer, answer
        assert answers(answer, kubernetes), answer
        assert await resolved(pods, pod, "no-such-service.default") is None


async def test_a_service_answers_from_another_pod(
        node_env: environment.LocalEnvironment, pods: nodekit.Pods,
        toolboxes: dict[str, str]) -> None:
    cluster = node_env.node_cluster(MEMBER)
    server_node = cluster.node_names[0]
    labels = {"app": "web"}
    async with node_env.client(MEMBER) as api:
        await api.create(resources.PODS, nodekit.pod(
            "web", NAMESPACE, "mkdir -p /tmp/www && echo served by $(hostname) > "
            "/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www",
            node=server_node, labels=labels), namespace=NAMESPACE)
        service = await api.create(resources.SERVICES, {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}},
            namespace=NAMESPACE)
        try:
            await nodekit.wait_running(api, "web", NAMESPACE)
            cluster_ip = service["spec"]["clusterIP"]
            assert ipaddress.ip_address(cluster_ip) in ipaddress.ip_network(
                cluster.plan.service_range(cluster.index))
            # From the server's Node and from the other one, by name and by ClusterIP.
            for node, pod in toolboxes.items():
                for url in (f"http://web.{NAMESPACE}.svc.cluster.local/",
                            f"http://{cluster_ip}/"):
                    deadline = time.monotonic() + 20  # kube-proxy's rules follow the Service
                    while True:
                        # (busybox 1.35's wget -T crashes: the timeout applet bounds it)
                        result = await pods.exec(pod, "timeout", "5", "wget", "-q", "-O", "-",
                                                 url)
                        if result.code == 0 or time.monotonic() > deadline:
                            break
                        await asyncio.sleep(0.5)
                    assert (result.code, result.output.strip()) == (0, "served by web"), \
                        f"{url} from {node}: {result.output}"
        finally:
            await api.delete(resources.SERVICES, "web", namespace=NAMESPACE, missing_ok=True)
            await api.delete(resources.PODS, "web", namespace=NAMESPACE, missing_ok=True)


async def test_a_pod_reaches_the_control_plane_api_server(
        node_env: environment.LocalEnvironment, pods: nodekit.Pods,
        toolboxes: dict[str, str]) -> None:
    """The control plane has no Nodes, yet its API server is on the Nodes' network: an agent
    in a member reaches it as it would over a real network (its address, no Service)."""
    control_plane = node_env.servers[environment.CONTROL_PLANE]
    assert ipaddress.ip_address(control_plane.host) in ipaddress.ip_network("198.18.64.0/18")
    for pod in toolboxes.values():
        result = await pods.exec(pod, "nc", "-w", "3", control_plane.host,
                                 str(control_plane.port), "-e", "true")  # -e comes last
        assert result.code == 0, result.output


async def scale_coredns(api: kube.ApiClient, replicas: int) -> None:
    await api.patch(resources.DEPLOYMENTS, coredns.DEPLOYMENT, {"spec": {"replicas": replicas}},
                    namespace=coredns.NAMESPACE)


async def test_coredns_scaled_to_zero_fails_resolution_and_back_restores_it(
        node_env: environment.LocalEnvironment, pods: nodekit.Pods,
        toolboxes: dict[str, str]) -> None:
    """The DNS outage the agent is to detect: no CoreDNS, no names; CoreDNS back, names back."""
    cluster = node_env.node_cluster(MEMBER)
    kubernetes = cluster.plan.kubernetes_service(cluster.index)
    pod = next(iter(toolboxes.values()))
    assert await resolved(pods, pod, "kubernetes.default") == kubernetes
    async with node_env.client(MEMBER) as api:
        try:
            await scale_coredns(api, 0)
            deadline = time.monotonic() + 60
            while await resolved(pods, pod, "kubernetes.default") is not None:
                assert time.monotonic() < deadline, "names still resolve without CoreDNS"
                await asyncio.sleep(0.5)
            # kube-proxy rejects what is sent to a Service without endpoints: no answer.
            answer = await looked_up(pods, pod, "kubernetes.default.svc.cluster.local")
            assert not answers(answer, kubernetes), answer
            assert await resolved(pods, pod, "kubernetes.default") is None
        finally:
            await scale_coredns(api, 2)
            await cluster.wait_coredns(api, 2, 90)
    deadline = time.monotonic() + 30  # kube-proxy adds the endpoints back
    while await resolved(pods, pod, "kubernetes.default") != kubernetes:
        assert time.monotonic() < deadline, "names do not resolve after CoreDNS came back"
        await asyncio.sleep(0.5)


@pytest.mark.timeout(240)
async def test_stopping_a_kubelet_makes_its_node_not_ready(
        node_env: environment.LocalEnvironment) -> None:
    cluster = node_env.node_cluster(MEMBER)
    name = cluster.node_names[-1]
    grace = cluster.settings.node_monitor_grace_period
    async with node_env.client(MEMBER) as api:
        assert await nodekit.node_ready(api, name) == "True"
        await cluster.stop_kubelet(name)
        try:
            began = time.monotonic()
            while await nodekit.node_ready(api, name) == "True":
                assert time.monotonic() - began < grace + 60, f"{name} still Ready"
                await asyncio.sleep(0.5)
            assert await nodekit.node_ready(api, name) in ("Unknown", "False")
            other = cluster.node_names[0]
            assert await nodekit.node_ready(api, other) == "True"
        finally:
            cluster.start_kubelet(name)
        began = time.monotonic()
        while await nodekit.node_ready(api, name) != "True":
            assert time.monotonic() - began < 90, f"{name} not Ready again"
            await asyncio.sleep(0.5)
        # Its Pods report Ready again too, so the next test sees a whole cluster.
        await cluster.wait_coredns(api, 2, 90)
