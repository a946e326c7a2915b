"""Fixtures for the provider tests: a real HAProxy, real HTTP backends, providers; all cleaned up.

A missing ``haproxy`` binary is a failure (with the install hint), never a skip.
"""

from __future__ import annotations

import contextlib
import pathlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import lbkit
import pytest

from clusterhealth_localenv import haproxy
from clusterhealth_mci.providers.haproxy import config, provider


@pytest.fixture
async def lb_factory() -> AsyncIterator[Callable[..., Awaitable[lbkit.LoadBalancer]]]:
    workdirs: list[str] = []
    started: list[lbkit.LoadBalancer] = []

    async def make(**layout_options: Any) -> lbkit.LoadBalancer:
        # A short directory: a UNIX socket path must stay under 108 bytes.
        workdir = tempfile.mkdtemp(prefix="mci-lb-", dir="/tmp")
        workdirs.append(workdir)
        options: dict[str, Any] = {
            "bind_address": "127.0.0.1", "bind_port": haproxy.free_port(),
            "admin_socket": f"{workdir}/admin.sock", "map_dir": f"{workdir}/maps",
            "slots": 8, "servers_per_slot": 4, "log_stdout": True,
        }
        options.update(layout_options)
        layout = config.HAProxyLayout(**options)
        config.write_map_files(layout)
        server = haproxy.HAProxyServer(config.render(layout), pathlib.Path(workdir))
        lb = lbkit.LoadBalancer(server, layout)
        started.append(lb)
        await server.start_async()
        return lb

    try:
        yield make
    finally:
        for lb in started:
            await lb.server.stop_async()
        for workdir in workdirs:
            shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
async def lb(lb_factory: Callable[..., Awaitable[lbkit.LoadBalancer]]) -> lbkit.LoadBalancer:
    return await lb_factory()


@pytest.fixture
async def backends() -> AsyncIterator[Callable[..., Awaitable[lbkit.Backend]]]:
    made: list[lbkit.Backend] = []

    async def make(name: str, cluster: str, delay: float = 0.0) -> lbkit.Backend:
        backend = await lbkit.Backend(name, cluster, delay).start()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.close()


@pytest.fixture
async def provider_factory() -> AsyncIterator[Callable[..., provider.HAProxyProvider]]:
    made: list[provider.HAProxyProvider] = []

    def make(lb: lbkit.LoadBalancer, **options: Any) -> provider.HAProxyProvider:
        options.setdefault("drain_timeout", 5.0)
        options.setdefault("poll_interval", 0.05)
        options.setdefault("monitor_interval", None)
        options.setdefault("command_timeout", 5.0)
        made.append(provider.HAProxyProvider(lb.server.admin_socket, lb.layout, **options))
        return made[-1]

    yield make
    for p in made:
        with contextlib.suppress(Exception):
            await p.close()


@pytest.fixture
def provider_for(
    provider_factory: Callable[..., provider.HAProxyProvider], lb: lbkit.LoadBalancer
) -> Callable[..., provider.HAProxyProvider]:
    """A provider on the test's HAProxy (``lb``)."""

    def make(**options: Any) -> provider.HAProxyProvider:
        return provider_factory(lb, **options)

    return make
