"""Real servers on loopback for the probe tests: dnsmasq and a small HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
from collections.abc import AsyncIterator

import probeservers
import prometheus_client
import pytest

import testkit
from clusterhealth_localenv import dns as localdns


@pytest.fixture
def registry() -> prometheus_client.CollectorRegistry:
    return prometheus_client.CollectorRegistry()


@pytest.fixture
async def dns_server(tmp_path: pathlib.Path) -> AsyncIterator[localdns.DnsServer]:
    """dnsmasq answering kubernetes.default (A only), NXDOMAIN for everything else."""
    server = localdns.DnsServer(
        "127.0.0.1",
        records={probeservers.KUBERNETES_DEFAULT: probeservers.KUBERNETES_IP},
        log_dir=tmp_path,
    )
    await server.start_async()
    try:
        yield server
    finally:
        await server.stop_async()


@pytest.fixture
async def http_server() -> AsyncIterator[str]:
    """``http://127.0.0.1:<port>``: ``/ok`` 200, ``/created`` 201, ``/fail`` 500, else 404."""
    statuses = {"/ok": (200, b"ok"), "/created": (201, b""), "/fail": (500, b"backend down")}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await testkit.read_head(reader)).decode("latin-1")
        parts = head.split(" ")
        path = parts[1] if len(parts) > 1 else "/"
        status, body = statuses.get(path.split("?")[0], (404, b"not found"))
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode() + body
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()

