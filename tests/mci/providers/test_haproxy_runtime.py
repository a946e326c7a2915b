"""The runtime API client and the local HAProxy server, against the real binary."""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
import socket
from collections.abc import Awaitable, Callable

import lbkit
import pytest

from clusterhealth_core.kube import errors
from clusterhealth_localenv import haproxy, processes
from clusterhealth_mci.providers import base
from clusterhealth_mci.providers.haproxy import provider, runtime

MakeBackend = Callable[..., Awaitable[lbkit.Backend]]


async def test_client_survives_a_restart(lb: lbkit.LoadBalancer) -> None:
    client = runtime.RuntimeClient(lb.server.admin_socket, timeout=5)
    try:
        before = (await client.show_info())["Pid"]
        servers = await client.show_servers_state()
        assert len(servers) == lb.layout.slots * lb.layout.servers_per_slot
        await lb.server.restart_async()
        after = (await client.show_info())["Pid"]  # the dead connection is replaced once
        assert after != before
        assert client.connections == 2
    finally:
        await client.close()


async def test_client_reports_refusals(lb: lbkit.LoadBalancer) -> None:
    client = runtime.RuntimeClient(lb.server.admin_socket, timeout=5)
    try:
        with pytest.raises(runtime.RuntimeApiError, match="No such backend"):
            await client.set_server_state("nope", "s1", "ready")
        with pytest.raises(runtime.RuntimeApiError, match="Invalid addr"):
            await client.set_server_addr("mci_slot_0", "s1", "10.0.0.x", 80)
        with pytest.raises(runtime.RuntimeApiError, match="Unknown map"):
            await client.show_map("/nonexistent.map")
        await client.add_map(lb.layout.exact_map, "a;b\\c", "v")
        assert [(e.key, e.value) for e in await client.show_map(lb.layout.exact_map)] == \
            [("a;b\\c", "v")]
        assert (await client.show_info())["Pid"]  # the connection is still usable
    finally:
        await client.close()


async def test_a_command_cancelled_before_its_reply_does_not_answer_the_next(
        lb: lbkit.LoadBalancer) -> None:
    client = runtime.RuntimeClient(lb.server.admin_socket, timeout=5)
    try:
        await client.show_info()
        pending = asyncio.create_task(client.show_servers_state())
        while not client.history or client.history[-1] != "show servers state":
            await asyncio.sleep(0)  # until the command is on its way
        pending.cancel()  # a term of leadership ends with it in flight
        await asyncio.gather(pending, return_exceptions=True)
        assert "Pid" in await client.show_info()  # its own reply, not the cancelled one's
    finally:
        await client.close()


async def test_commands_that_change_haproxy_ask_the_guard_first(
        lb: lbkit.LoadBalancer) -> None:
    leading = [True]

    def fence() -> None:
        if not leading[0]:
            raise errors.NotLeader("replica-a does not lead lease default/mci: write refused")

    client = runtime.RuntimeClient(lb.server.admin_socket, timeout=5, guard=fence)
    try:
        await client.set_server_weight("mci_slot_0", "s1", 7)
        leading[0] = False
        with pytest.raises(runtime.RuntimeFenced, match="'set server mci_slot_0/s1 weight 9' "
                                                        "not sent: replica-a does not lead"):
            await client.set_server_weight("mci_slot_0", "s1", 9)
        with pytest.raises(runtime.RuntimeFenced):
            await client.add_map(lb.layout.exact_map, "fenced", "mci_slot_0")
        # reads pass, and show that nothing was changed
        weights = {s.server: s.weight for s in await client.show_servers_state("mci_slot_0")}
        assert weights["s1"] == 7
        assert await client.show_map(lb.layout.exact_map) == []
        assert "set server mci_slot_0/s1 weight 9" not in client.history
    finally:
        await client.close()


async def test_client_over_tcp(
    lb_factory: Callable[..., Awaitable[lbkit.LoadBalancer]],
) -> None:
    port = haproxy.free_port()
    lb = await lb_factory(admin_socket=f"127.0.0.1:{port}")
    assert lb.server.admin_socket == f"ipv4@127.0.0.1:{port}"
    client = runtime.RuntimeClient(f"127.0.0.1:{port}")
    try:
        assert (await client.show_info())["Pid"] == str(lb.server.pid)
    finally:
        await client.close()


async def test_unreachable_haproxy_is_a_provider_error(tmp_path: pathlib.Path) -> None:
    client = runtime.RuntimeClient(str(tmp_path / "missing.sock"), timeout=1)
    with pytest.raises(base.ProviderError, match="cannot reach HAProxy"):
        await client.show_info()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(runtime.RuntimeConnectionError):
        await runtime.RuntimeClient(f"127.0.0.1:{port}", timeout=1).show_info()


async def test_provider_refuses_a_foreign_layout(
    lb: lbkit.LoadBalancer, provider_factory: Callable[..., provider.HAProxyProvider],
) -> None:
    bigger = dataclasses.replace(lb.layout, slots=lb.layout.slots + 1)
    p = provider_factory(lbkit.LoadBalancer(lb.server, bigger))
    with pytest.raises(base.ProviderError, match="deploy the configuration rendered"):
        await p.get_load_balancer("x/y")


async def test_a_refusing_endpoint_costs_no_request(
    lb: lbkit.LoadBalancer, backends: MakeBackend,
    provider_factory: Callable[..., provider.HAProxyProvider],
) -> None:
    """``retries`` + ``option redispatch 1``: a connection refused is retried on another server."""
    live = await backends("live", "member1")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead_port = sock.getsockname()[1]
    spec = lbkit.spec("shop/web", [(None, "/", "Prefix", "web:80")],
                      {"web:80": base.Backend("web", "80", (
                          live.endpoint, base.Endpoint("member2", "127.0.0.1", dead_port)))})
    await provider_factory(lb).ensure_load_balancer(spec)
    client = lbkit.Client(lb.port)
    try:
        responses = [await client.get("any.example.com", "/") for _ in range(20)]
    finally:
        await client.close()
    assert {(r.status, r.backend) for r in responses} == {(200, "live")}


def test_missing_haproxy_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(processes, "SBIN_DIRS", ("/nonexistent",))
    with pytest.raises(haproxy.HAProxyError, match="install Debian package haproxy"):
        haproxy.find_haproxy()


def test_bad_configuration_quotes_haproxy(tmp_path: pathlib.Path) -> None:
    server = haproxy.HAProxyServer(
        f"global\n    stats socket {tmp_path}/a.sock level admin\nfrontend x\n    bind :notaport\n",
        tmp_path)
    with pytest.raises(haproxy.HAProxyError, match="ALERT"):
        server.start()
    with pytest.raises(haproxy.HAProxyError, match="stats socket"):
        haproxy.HAProxyServer("global\n", tmp_path)
