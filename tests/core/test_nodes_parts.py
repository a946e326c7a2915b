"""The pure parts of clusters whose Nodes run containers: addresses, CoreDNS's objects, images.

The live behaviour (Nodes Ready, Pods, DNS, Services, teardown) is in
``tests/nodes``; these are the tables and files it is built from.
"""

from __future__ import annotations

import ipaddress
import json
import os
import pathlib
import tarfile

import pytest
import yaml
from bench import installed

from clusterhealth_localenv import (
    coredns,
    environment,
    folderimages,
    netns,
    nodehost,
    nodenet,
    nodes,
    podnet,
)


@pytest.mark.parametrize(("block", "cluster", "node", "expected"), [
    (0, 0, 0, {"api": "198.18.64.16", "node": "198.18.64.17", "pods": "198.18.65.0/24",
               "node_pods": "198.18.65.0/26", "services": "198.18.66.0/24",
               "kubernetes": "198.18.66.1", "dns": "198.18.66.10"}),
    (0, 1, 1, {"api": "198.18.64.32", "node": "198.18.64.34", "pods": "198.18.67.0/24",
               "node_pods": "198.18.67.64/26", "services": "198.18.68.0/24",
               "kubernetes": "198.18.68.1", "dns": "198.18.68.10"}),
    (3, 6, 3, {"api": "198.18.112.112", "node": "198.18.112.116",
               "pods": "198.18.125.0/24", "node_pods": "198.18.125.192/26",
               "services": "198.18.126.0/24", "kubernetes": "198.18.126.1",
               "dns": "198.18.126.10"}),
])
def test_address_plan(block: int, cluster: int, node: int, expected: dict[str, str]) -> None:
    plan = nodenet.AddressPlan(block)
    assert {"api": plan.api_server(cluster), "node": plan.node_ip(cluster, node),
            "pods": plan.pod_range(cluster), "node_pods": plan.node_pod_cidr(cluster, node),
            "services": plan.service_range(cluster),
            "kubernetes": plan.kubernetes_service(cluster),
            "dns": plan.dns_service(cluster)} == expected


def test_every_address_is_in_its_block_and_no_two_ranges_overlap() -> None:
    seen: list[ipaddress.IPv4Network] = []
    for block in nodenet.BLOCKS:
        plan = nodenet.AddressPlan(block)
        network = ipaddress.ip_network(plan.network)
        link = ipaddress.ip_network(plan.link_network)
        ranges = [link]
        for cluster in range(nodenet.MAX_CLUSTER + 1):
            ranges += [ipaddress.ip_network(plan.pod_range(cluster)),
                       ipaddress.ip_network(plan.service_range(cluster))]
            addresses = [plan.api_server(cluster)] + [
                plan.node_ip(cluster, n) for n in range(nodenet.MAX_NODES)]
            assert all(ipaddress.ip_address(a) in link for a in addresses)
            node_ranges = [ipaddress.ip_network(plan.node_pod_cidr(cluster, n))
                           for n in range(nodenet.MAX_NODES)]
            assert all(r.subnet_of(ipaddress.ip_network(plan.pod_range(cluster)))
                       for r in node_ranges)
        for r in ranges:
            assert r.subnet_of(network)
            assert not any(r.overlaps(other) for other in seen), r
            seen.append(r)
        # The gateway, API servers and Nodes never share an address.
        hosts = [plan.gateway] + [plan.api_server(c) for c in range(7)] + [
            plan.node_ip(c, n) for c in range(7) for n in range(4)]
        assert len(set(hosts)) == len(hosts)


def test_node_ranges_are_disjoint_from_test_hosts_and_pod_networks() -> None:
    mine = ipaddress.ip_network("198.18.64.0/18")
    assert all(ipaddress.ip_network(nodenet.AddressPlan(b).network).subnet_of(mine)
               for b in nodenet.BLOCKS)
    test_hosts = [ipaddress.ip_network(f"198.18.{i}.0/24") for i in netns.INDEXES]
    assert not any(mine.overlaps(h) for h in test_hosts)
    pod_networks = [ipaddress.ip_network(podnet.PodNetwork(b, owner=1).network)
                    for b in podnet.BLOCKS]
    assert not any(mine.overlaps(p) for p in pod_networks)
    assert mine.subnet_of(ipaddress.ip_network("198.18.0.0/15"))


@pytest.mark.parametrize(("call", "message"), [
    (lambda: nodenet.AddressPlan(4), "block"),
    (lambda: nodenet.AddressPlan(0).api_server(7), "cluster index"),
    (lambda: nodenet.AddressPlan(0).node_ip(1, 4), "node index"),
])
def test_address_plan_refuses_what_it_has_no_room_for(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_a_bridge_name_fits_and_names_its_owner() -> None:
    network = nodenet.NodeNetwork(nodenet.AddressPlan(3), owner=4194304)
    assert network.bridge == "chk4194304b3"
    assert len(network.veth(27)) <= 15  # IFNAMSIZ - 1
    assert network.tag == "4194304b3"


@pytest.mark.parametrize(("settings", "message"), [
    (nodes.NodeSettings(nodes=5), "nodes must be"),
    (nodes.NodeSettings(control_plane_nodes=-1), "control_plane_nodes"),
    (nodes.NodeSettings(proxy_mode="ipvs"), "proxy_mode"),  # type: ignore[arg-type]
    (nodes.NodeSettings(max_pods=62), "max_pods"),
    (nodes.NodeSettings(coredns_replicas=-1), "coredns_replicas"),
])
def test_settings_are_checked(settings: nodes.NodeSettings, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings.validate()


async def test_the_karmada_control_plane_runs_no_nodes(tmp_path: pathlib.Path) -> None:
    config = environment.EnvironmentConfig(
        members=(), control_plane="karmada", workdir=tmp_path,
        nodes=nodes.NodeSettings(control_plane_nodes=1))
    env = environment.LocalEnvironment(config)
    try:
        with pytest.raises(ValueError, match="Karmada control plane runs no Nodes"):
            await env.start()
    finally:
        await env.stop()
    assert env.node_env is None


def test_which_clusters_get_nodes() -> None:
    settings = nodes.NodeSettings(nodes=2, members=("member1",), control_plane_nodes=1)
    assert settings.count("member1", False) == 2
    assert settings.count("member2", False) == 0
    assert settings.count("control-plane", True) == 1
    assert nodes.NodeSettings().count("control-plane", True) == 0


def test_corefile_forwards_only_to_a_named_upstream() -> None:
    plain = coredns.corefile()
    assert "kubernetes cluster.local in-addr.arpa ip6.arpa" in plain
    assert "forward" not in plain
    assert "loop" not in plain
    forwarding = coredns.corefile(upstream="198.18.201.2")
    assert "forward . 198.18.201.2" in forwarding
    assert "loop" in forwarding


def test_coredns_objects_are_kubeadms() -> None:
    made = dict(coredns.objects("localhost/clusterhealth/coredns:v1.12.1", "198.18.68.10"))
    assert list(made) == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
                          "Deployment", "Service"]
    service = made["Service"]
    assert service["metadata"]["name"] == "kube-dns"
    assert service["spec"]["clusterIP"] == "198.18.68.10"
    assert {(p["port"], p["protocol"]) for p in service["spec"]["ports"]} == {
        (53, "UDP"), (53, "TCP"), (9153, "TCP")}
    deployment = made["Deployment"]
    assert deployment["metadata"]["namespace"] == "kube-system"
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["dnsPolicy"] == "Default"
    assert pod["serviceAccountName"] == "coredns"
    assert pod["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_docker_archive_is_what_docker_save_writes(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "hello").write_text("#!/bin/sh\necho hello\n")
    (root / "bin" / "hello").chmod(0o755)
    os.symlink("hello", root / "bin" / "hi")
    first = folderimages.write_docker_archive(root, tmp_path / "a.tar", "localhost/t/hello:1",
                                        entrypoint=["/bin/hello"])
    second = folderimages.write_docker_archive(root, tmp_path / "b.tar", "localhost/t/hello:1",
                                         entrypoint=["/bin/hello"])
    assert first.image_id == second.image_id  # reproducible
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    with tarfile.open(first.archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        assert manifest[0]["RepoTags"] == ["localhost/t/hello:1"]
        config = json.load(tar.extractfile(manifest[0]["Config"]))  # type: ignore[arg-type]
        assert config["config"]["Entrypoint"] == ["/bin/hello"]
        assert (config["architecture"], config["os"]) == ("amd64", "linux")
        layer = tar.extractfile(manifest[0]["Layers"][0])
        assert layer is not None
        with tarfile.open(fileobj=layer) as inner:
            members = {m.name: m for m in inner.getmembers()}
    assert members["bin/hello"].mode & 0o777 == 0o755
    assert members["bin/hi"].issym()
    assert members["bin/hi"].linkname == "hello"
    assert {m.uid for m in members.values()} == {0}


def test_an_image_needs_a_tag_and_a_folder(tmp_path: pathlib.Path) -> None:
    with pytest.raises(folderimages.ImageError, match="no tag"):
        folderimages.write_docker_archive(tmp_path, tmp_path / "x.tar", "localhost/t/hello")
    with pytest.raises(folderimages.ImageError, match="not a folder"):
        folderimages.write_docker_archive(tmp_path / "missing", tmp_path / "x.tar", "t:1")


def test_busybox_image_needs_the_static_busybox(tmp_path: pathlib.Path) -> None:
    with pytest.raises(folderimages.ImageError, match="busybox-static"):
        folderimages.busybox_image(tmp_path / "b.tar", "t:1", busybox=pathlib.Path("/bin/sh"))
    image = folderimages.busybox_image(tmp_path / "b.tar", "localhost/clusterhealth/busybox:test")
    with tarfile.open(image.archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        layer = tar.extractfile(manifest[0]["Layers"][0])
        assert layer is not None
        with tarfile.open(fileobj=layer) as inner:
            names = set(inner.getnames())
    assert {"bin/busybox", "bin/sh", "bin/nslookup", "bin/wget", "bin/httpd", "tmp"} <= names


def test_kernel_settings_are_restored_by_the_last_holder(tmp_path: pathlib.Path) -> None:
    state = tmp_path / "sysctls.json"
    names = ("kernel.panic", "vm.overcommit_memory")
    before = nodehost.read_sysctls(names)
    settings = nodehost.KernelSettings(names, state)
    settings.hold(os.getpid())
    settings.hold(os.getpid())  # a second environment of the same process
    assert json.loads(state.read_text())["values"] == before
    settings.release(os.getpid())
    assert state.exists()  # one holder left
    settings.release(os.getpid())
    assert not state.exists()
    assert nodehost.read_sysctls(names) == before


def test_kernel_settings_left_by_a_dead_holder_are_restored_first(
        tmp_path: pathlib.Path) -> None:
    state = tmp_path / "sysctls.json"
    names = ("kernel.panic",)
    current = nodehost.read_sysctls(names)
    dead = 2**22 + 1  # above pid_max: never alive
    state.write_text(json.dumps({"holders": [dead], "values": current}))
    settings = nodehost.KernelSettings(names, state)
    settings.hold(os.getpid())
    assert json.loads(state.read_text())["holders"] == [os.getpid()]
    settings.release(os.getpid())
    assert nodehost.read_sysctls(names) == current


def test_limits_are_raised_while_held_and_restored_after(tmp_path: pathlib.Path) -> None:
    """inotify's per-user limits (five Nodes ran out of Debian's 128 instances): raised to a
    minimum while held, written back by the last holder, also when the first holder (an
    older environment) recorded fewer names."""
    state = tmp_path / "sysctls.json"
    name = "fs.inotify.max_user_watches"
    before = nodehost.read_sysctls((name, "kernel.panic"))
    older = nodehost.KernelSettings(("kernel.panic",), state)
    older.hold(os.getpid())
    raising = nodehost.KernelSettings(("kernel.panic",), state,
                                      minimums={name: int(before[name]) + 1})
    try:
        raising.hold(os.getpid())
        assert int(nodehost.read_sysctls((name,))[name]) == int(before[name]) + 1
        assert json.loads(state.read_text())["values"] == before
    finally:
        raising.release(os.getpid())
        older.release(os.getpid())
    assert nodehost.read_sysctls((name, "kernel.panic")) == before


def test_containerd_and_cni_configurations(tmp_path: pathlib.Path) -> None:
    text = nodes._containerd_config(tmp_path)
    assert "restrict_oom_score_adj = true" in text
    assert f'sandbox_image = "{nodes.PAUSE_IMAGE}"' in text
    assert f'conf_dir = "{tmp_path / "cni"}"' in text
    cni = nodes._cni_config("198.18.67.64/26", tmp_path)
    bridge = cni["plugins"][0]
    assert bridge["ipam"]["ranges"] == [[{"subnet": "198.18.67.64/26"}]]
    assert bridge["ipMasq"] is False
    assert yaml.safe_dump(cni)  # plain data


@pytest.mark.parametrize(("files", "expected"), [
    ({"memory.usage_in_bytes": "52428800",
      "memory.stat": "cache 20971520\ninactive_file 1\ntotal_inactive_file 10485760\n"},
     40 * 1024 * 1024),
    ({"memory.current": "31457280", "memory.stat": "anon 1\ninactive_file 31457281\n"}, 0),
    ({"memory.current": "31457280", "memory.stat": "anon 1\ninactive_file 1048576\n"},
     29 * 1024 * 1024),
])
def test_working_set_is_usage_minus_inactive_file(
        tmp_path: pathlib.Path, files: dict[str, str], expected: int) -> None:
    """bench.installed reads a container's memory as kubelet does (v1: the hierarchy's
    ``total_`` figure; v2: ``memory.current``), never below zero."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert installed.working_set_bytes(tmp_path) == expected
