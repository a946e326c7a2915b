"""The HTTP and TCP probes against real servers on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import ssl
from collections.abc import AsyncIterator

import probeservers
import prometheus_client
import pytest

from clusterhealth_agent.probes import base, http, tcp
from clusterhealth_localenv import pki


@pytest.fixture
def metrics(registry: prometheus_client.CollectorRegistry) -> http.HTTPMetrics:
    return http.HTTPMetrics(registry)


def http_probe(
    metrics: http.HTTPMetrics,
    url: str,
    expect_status: tuple[range | int, ...] = http.DEFAULT_EXPECT_STATUS,
    insecure_skip_verify: bool = False,
) -> http.HTTPProbe:
    return http.HTTPProbe("web", "WebReachable", url, expect_status, metrics=metrics,
                          insecure_skip_verify=insecure_skip_verify)


def status_gauge(registry: prometheus_client.CollectorRegistry) -> float | None:
    return registry.get_sample_value("clusterhealth_agent_http_status_code", {"probe": "web"})


async def test_http_ok(
    http_server: str, registry: prometheus_client.CollectorRegistry, metrics: http.HTTPMetrics
) -> None:
    result = await base.run_probe(http_probe(metrics, f"{http_server}/ok?verbose=1"), 2.0)
    assert (result.ok, result.reason) == (True, "HTTPOK")
    assert "HTTP 200" in result.message
    assert status_gauge(registry) == 200


async def test_http_unexpected_status(
    http_server: str, registry: prometheus_client.CollectorRegistry, metrics: http.HTTPMetrics
) -> None:
    result = await base.run_probe(http_probe(metrics, f"{http_server}/fail"), 2.0)
    assert (result.ok, result.reason) == (False, "HTTPStatus")
    assert "HTTP 500" in result.message and "200-399" in result.message
    assert "backend down" in result.message
    assert status_gauge(registry) == 500


async def test_http_expected_status_list(
    http_server: str, metrics: http.HTTPMetrics
) -> None:
    probe = http_probe(metrics, f"{http_server}/created", expect_status=(200, 204))
    result = await base.run_probe(probe, 2.0)
    assert result.reason == "HTTPStatus" and "expected 200, 204" in result.message
    probe = http.HTTPProbe("other", "OtherReachable", f"{http_server}/fail",
                           (500, range(200, 300)), metrics=metrics)
    assert (await base.run_probe(probe, 2.0)).ok


async def test_http_closed_port_is_refused(
    registry: prometheus_client.CollectorRegistry, metrics: http.HTTPMetrics
) -> None:
    url = f"http://127.0.0.1:{probeservers.closed_port()}/healthz"
    result = await base.run_probe(http_probe(metrics, url), 2.0)
    assert (result.ok, result.reason) == (False, "ConnectionRefused")
    assert status_gauge(registry) == 0


async def test_http_peer_closing_without_answer_is_connection_failed(
    metrics: http.HTTPMetrics,
) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    async with server:
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
        result = await base.run_probe(http_probe(metrics, url), 2.0)
    assert (result.ok, result.reason) == (False, "ConnectionFailed")


async def test_http_silent_server_hits_the_deadline(
    metrics: http.HTTPMetrics,
) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client gives up
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    async with server:
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
        result = await base.run_probe(http_probe(metrics, url), 0.3)
    assert result.reason == "Timeout" and result.duration < 1.0


@contextlib.asynccontextmanager
async def https_server(directory: pathlib.Path) -> AsyncIterator[int]:
    cert, key = pki.CertificateAuthority().serving("localhost", ["127.0.0.1"], []).write(
        directory, "serving"
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await reader.readline()
            writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    async with server:
        yield int(server.sockets[0].getsockname()[1])


async def test_https_verifies_with_system_cas_unless_told_not_to(
    tmp_path: pathlib.Path, metrics: http.HTTPMetrics
) -> None:
    async with https_server(tmp_path) as port:
        url = f"https://127.0.0.1:{port}/healthz"
        verified = await base.run_probe(http_probe(metrics, url), 2.0)
        skipped = await base.run_probe(
            http_probe(metrics, url, insecure_skip_verify=True), 2.0
        )
    assert (verified.ok, verified.reason) == (False, "ConnectionFailed")
    assert "certificate" in verified.message
    assert (skipped.ok, skipped.reason) == (True, "HTTPOK")


def test_http_rejects_non_http_urls(metrics: http.HTTPMetrics) -> None:
    with pytest.raises(ValueError, match="not an http"):
        http_probe(metrics, "ftp://198.18.0.1/")


async def test_tcp_connected_refused_and_failed() -> None:
    accepted = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        port = int(server.sockets[0].getsockname()[1])
        result = await base.run_probe(tcp.TCPProbe("db", "DatabaseReachable", "127.0.0.1", port),
                                      2.0)
        await asyncio.wait_for(accepted.wait(), 2.0)
    assert (result.ok, result.reason) == (True, "Connected")
    assert f"127.0.0.1:{port}" in result.message

    refused = tcp.TCPProbe("db", "DatabaseReachable", "127.0.0.1", probeservers.closed_port())
    result = await base.run_probe(refused, 2.0)
    assert (result.ok, result.reason) == (False, "ConnectionRefused")

    # TCP to a multicast address: "network is unreachable" at once, not refused.
    unreachable = tcp.TCPProbe("db", "DatabaseReachable", "224.0.0.1", 5432)
    result = await base.run_probe(unreachable, 2.0)
    assert (result.ok, result.reason) == (False, "ConnectionFailed")
    assert "unreachable" in result.message


def test_tcp_rejects_bad_ports() -> None:
    with pytest.raises(ValueError, match="not in 1-65535"):
        tcp.TCPProbe("db", "DatabaseReachable", "127.0.0.1", 0)
