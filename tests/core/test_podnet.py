"""The pod network: Pod IPs a server listens on, reached from this machine, cleaned up."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import pathlib
import subprocess

import pytest

from clusterhealth_localenv import httpload, podnet


def _exists(namespace: str) -> bool:
    return pathlib.Path(f"/var/run/netns/{namespace}").exists()


def _routes(network: str) -> str:
    return subprocess.run(["ip", "-4", "route", "show", "root", network], capture_output=True,
                          text=True, check=True).stdout


async def test_servers_on_pod_ips_answer_from_this_machine() -> None:
    network = await asyncio.to_thread(podnet.create, [1, 2])
    backends: list[httpload.Backend] = []
    try:
        assert network.ranges == [network.pod_cidr(1), network.pod_cidr(2)]
        block = ipaddress.ip_network(network.network)
        assert block.subnet_of(ipaddress.ip_network("198.19.0.0/16"))
        assert all(ipaddress.ip_network(c).subnet_of(block) for c in network.ranges)
        assert await asyncio.to_thread(_exists, network.namespace)
        for index in (1, 2):
            ip = network.pod_cidr(index).replace(".0/24", ".7")
            sock = await asyncio.to_thread(network.listen, ip, 8080)
            backends.append(await httpload.Backend(f"pod-{index}", "").start(sock=sock))
        for index in (1, 2):
            ip = network.pod_cidr(index).replace(".0/24", ".7")
            reader, writer = await asyncio.open_connection(ip, 8080)  # from this namespace
            writer.write(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            answer = await reader.read()
            writer.close()
            assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(
                f"pod-{index}\n".encode()), answer
        # nothing listens on these addresses in this machine's own namespace
        with pytest.raises(OSError, match="Cannot assign requested address") as refused:
            await asyncio.to_thread(_bind_here, network.pod_cidr(1).replace(".0/24", ".8"))
        assert refused.value.errno == errno.EADDRNOTAVAIL
        # an address outside the Pod ranges is not local in the network either
        with pytest.raises(OSError, match="Cannot assign requested address"):
            network.listen(network.pod_cidr(3).replace(".0/24", ".7"), 8080)
    finally:
        for backend in backends:
            await backend.close()
        await asyncio.to_thread(network.destroy)
    assert not await asyncio.to_thread(_exists, network.namespace)
    assert _routes(network.network) == ""


def _bind_here(ip: str) -> None:
    import socket
    with socket.socket() as sock:
        sock.bind((ip, 8080))


def test_a_network_left_by_a_dead_process_is_swept() -> None:
    proc = subprocess.Popen(["sleep", "0"])
    proc.wait()  # its pid names the network: a process that has ended
    left = podnet.PodNetwork(podnet.BLOCKS.stop - 1, owner=proc.pid).create([1])
    try:
        assert _routes(left.network) != ""
        assert left.namespace in podnet.sweep()
        assert not _exists(left.namespace)
        assert _routes(left.network) == ""
    finally:
        left.destroy()


def test_the_layout_of_a_block() -> None:
    network = podnet.PodNetwork(3, owner=1)
    assert network.network == "198.19.24.0/21"
    assert [network.pod_cidr(1), network.pod_cidr(6)] == ["198.19.25.0/24", "198.19.30.0/24"]
    assert (network.host_address, network.ns_address) == ("198.19.31.1", "198.19.31.2")
    assert (network.namespace, network.host_link) == ("chp-1", "chp1h")
    with pytest.raises(ValueError, match=r"index must be 1\.\.6"):
        network.pod_cidr(7)
    with pytest.raises(ValueError, match=r"block must be in 0\.\.31"):
        podnet.PodNetwork(32)
