"""Both HTTP transports (httpx, aiohttp) against small real servers on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import prometheus_client
import pytest

import testkit
from clusterhealth_core import serving
from clusterhealth_core.kube import aiohttp_transport, transport

Make = Callable[[str], transport.Transport]


@pytest.fixture(params=transport.LIBRARIES)
def make(request: pytest.FixtureRequest) -> Make:
    """A transport to a plain-HTTP loopback URL, on each library in turn."""
    if request.param == "aiohttp":
        return lambda url: aiohttp_transport.AiohttpTransport(url, None)
    return lambda url: transport.HttpTransport(url, None)


def _answering(response: bytes, connections: list[None] | None = None) -> testkit.Handler:
    """A server handler answering every request of a kept-alive connection with ``response``.

    ``connections`` gets an item per connection the server accepted.
    """
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if connections is not None:
            connections.append(None)
        while (await testkit.read_head(reader)):
            writer.write(response)
            await writer.drain()
        writer.close()
    return handle


async def test_chunked_body_and_keep_alive(make: Make) -> None:
    connections: list[None] = []
    handle = _answering(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n", connections)
    async with testkit.loopback_server(handle) as url:
        http = make(url)
        first = await http.request("GET", "/a")
        second = await http.request("GET", "/b")
        await http.close()
    assert first.body == second.body == b"hello world"
    assert len(connections) == 1  # the second request reused the connection


async def test_server_closing_idle_connection_is_retried_on_a_new_one(make: Make) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await testkit.read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()  # keep-alive promised, then closed: the next reuse must recover

    async with testkit.loopback_server(handle) as url:
        http = make(url)
        assert (await http.request("GET", "/")).body == b"ok"
        await asyncio.sleep(0.05)
        assert (await http.request("GET", "/")).body == b"ok"
        await http.close()


async def test_stream_lines_split_across_chunks(make: Make) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await testkit.read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b'{"a":', b'1}\n{"b"', b":2}\n"):
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async with testkit.loopback_server(handle) as url:
        http = make(url)
        async with http.stream("GET", "/watch", idle_timeout=5) as response:
            lines = [line async for line in response.lines()]
        await http.close()
    assert lines == ['{"a":1}', '{"b":2}']


async def test_response_headers_are_found_by_any_case(make: Make) -> None:
    handle = _answering(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\n"
                        b"ETag: \"v1\"\r\nContent-Length: 2\r\n\r\nno")
    async with testkit.loopback_server(handle) as url:
        http = make(url)
        whole = await http.request("GET", "/a")
        async with http.stream("GET", "/watch", idle_timeout=5) as streamed:
            found = [(r.headers.get("retry-after"), r.headers.get("Retry-After"),
                      r.headers.get("etag")) for r in (whole, streamed)]
            assert await streamed.read_all() == b"no"
        await http.close()
    assert found == [("3", "3", '"v1"')] * 2


async def test_refused_connection_is_a_transport_error(make: Make) -> None:
    async with testkit.loopback_server(_read_request_and_close) as url:
        pass  # closed: nothing listens on the port any more
    http = make(url)
    with pytest.raises(transport.TransportError) as caught:
        await http.request("GET", "/")
    await http.close()
    assert caught.value.sent is False  # nothing reached a server: safe to send again
    assert transport.refused(caught.value)


async def _read_request_and_close(reader: asyncio.StreamReader,
                                  writer: asyncio.StreamWriter) -> None:
    writer.close()


async def test_health_server_endpoints(make: Make) -> None:
    registry = prometheus_client.CollectorRegistry()
    prometheus_client.Counter("demo_events", "events", registry=registry).inc(3)
    health = serving.HealthServer(registry, host="127.0.0.1", port=0)
    ready = {"value": False}
    health.add_liveness("loop", lambda: (True, "running"))
    health.add_readiness("synced", lambda: (ready["value"], "informer synced"))
    await health.start()
    try:
        http = make(f"http://127.0.0.1:{health.bound_port}")
        metrics = await http.request("GET", "/metrics")
        assert b"demo_events_total 3.0" in metrics.body
        assert (await http.request("GET", "/healthz")).status == 200
        not_ready = await http.request("GET", "/readyz")
        assert not_ready.status == 503
        assert b"[-]synced failed: informer synced" in not_ready.body
        ready["value"] = True
        verbose = await http.request("GET", "/readyz", query={"verbose": ""})
        assert verbose.status == 200 and b"[+]synced ok" in verbose.body
        assert (await http.request("GET", "/nope")).status == 404
        assert (await http.request("POST", "/healthz", body=b"")).status == 405
        await http.close()
    finally:
        await health.stop()


def test_aiohttp_timeouts_are_shared_per_read_timeout_and_their_number_bounded() -> None:
    http = aiohttp_transport.AiohttpTransport("http://127.0.0.1:1", None)
    first = http._timeout(30.0)
    assert http._timeout(30.0) is first
    assert (first.sock_read, first.connect, first.total) == (30.0, http.connect_timeout, None)
    made = [http._timeout(float(seconds)) for seconds in range(100)]
    assert [t.sock_read for t in made] == [float(s) for s in range(100)]
    assert len(http._timeouts) == aiohttp_transport._SHARED_TIMEOUTS
