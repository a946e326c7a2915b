"""The agent reaches the control plane through an HTTP CONNECT proxy named in its kubeconfig.

A real tinyproxy stands between the agent and the control-plane API server;
its log proves the reports went through it.
"""

from __future__ import annotations

import pathlib
from collections.abc import Awaitable, Callable

import agentfleet as c
import yaml

from clusterhealth_core.kube import client as kube
from clusterhealth_localenv import environment, proxy

Factory = Callable[[int], Awaitable[c.Fleet]]


async def test_reports_go_through_the_kubeconfigs_proxy(
        env: environment.LocalEnvironment, cp: kube.ApiClient, fleet_factory: Factory,
        tmp_path: pathlib.Path) -> None:
    control_plane = env.servers[environment.CONTROL_PLANE]
    with proxy.TinyProxy(tmp_path / "proxy", connect_ports=[control_plane.port]) as tiny:
        document = yaml.safe_load(env.kubeconfig().read_text())
        document["clusters"][0]["cluster"]["proxy-url"] = tiny.url
        proxied = tmp_path / "karmada-through-proxy.kubeconfig"
        proxied.write_text(yaml.safe_dump(document))
        fleet = await fleet_factory(1)
        fleet.start_agent(fleet.nodes[0], ["--karmada-kubeconfig", str(proxied)])
        await c.wait_condition(cp, "True", timeout=30)
        target = f"{control_plane.host}:{control_plane.port}"
        assert target in tiny.connect_targets()
        assert control_plane.host in tiny.established_hosts()
