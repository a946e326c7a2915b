"""What one API server may cost: a deadline per call, caps on bodies and watch lines, slots.

Against real servers on loopback, on both HTTP libraries: a member that
accepts and trickles a byte at a time (``clusterhealth_localenv.hung``),
small servers that send too much, and the environment's real API server for
what must keep working at the defaults (large pages, large watch events,
bursts of requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator

import pytest

import testkit
from clusterhealth_core.kube import aiohttp_transport, config, errors, resources, transport
from clusterhealth_core.kube import client as kube
from clusterhealth_localenv import environment, hung

LIBRARY: list[transport.Library] = ["httpx"]


library = testkit.each_http_library(LIBRARY)
"""Every limit holds on both HTTP libraries."""


def make_transport(url: str, **caps: int) -> transport.Transport:
    if LIBRARY[0] == "aiohttp":
        return aiohttp_transport.AiohttpTransport(url, None, **caps)  # type: ignore[arg-type]
    return transport.HttpTransport(url, None, **caps)  # type: ignore[arg-type]


async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Headers, then a chunked body of one byte every 0.1 s: every read is quick, the
    whole never ends."""
    await testkit.read_head(reader)
    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    with contextlib.suppress(ConnectionError, OSError):
        while not reader.at_eof():  # until the client hangs up
            writer.write(b"1\r\n \r\n")
            await writer.drain()
            await asyncio.sleep(0.1)


# --- the transports -----------------------------------------------------------------


async def test_a_deadline_ends_an_answer_that_trickles() -> None:
    async with testkit.loopback_server(trickle) as url:
        http = make_transport(url)
        started = time.monotonic()
        with pytest.raises(transport.DeadlineExceeded, match=r"within 1s"):
            await http.request("GET", "/", read_timeout=5.0, deadline=1.0)
        took = time.monotonic() - started
        await http.close()
    assert took < 5.0  # the read timeout alone would never have ended it


async def test_bodies_past_the_cap_are_refused() -> None:
    async def announced(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await testkit.read_head(reader)  # a Content-Length past the cap: refused before reading
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000)
        await writer.drain()

    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await testkit.read_head(reader)  # no length: counted while read
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(10):
            writer.write(b"200\r\n" + b"y" * 512 + b"\r\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    for handler in (announced, chunked):
        async with testkit.loopback_server(handler) as url:
            http = make_transport(url, max_response_bytes=4096)
            with pytest.raises(transport.TooLarge, match="larger than 4 KiB") as caught:
                await http.request("GET", "/")
            assert caught.value.limit == 4096
            big_enough = make_transport(url, max_response_bytes=8192)
            assert len((await big_enough.request("GET", "/")).body) in (5000, 5120)
            await http.close()
            await big_enough.close()


async def test_a_watch_line_past_the_cap_is_refused_and_shorter_ones_pass() -> None:
    async def lines(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await testkit.read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b"a" * 60 + b"\n" + b"b" * 30, b"c" * 34 + b"\n", b"d" * 100 + b"\n"):
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async with testkit.loopback_server(lines) as url:
        http = make_transport(url, max_line_bytes=64)
        seen: list[str] = []

        async def read() -> None:
            async with http.stream("GET", "/watch", idle_timeout=5) as response:
                async for line in response.lines():
                    seen.append(line)

        with pytest.raises(transport.TooLarge, match="a watch line larger than 64 bytes"):
            await read()
        await http.close()
    assert seen == ["a" * 60, "b" * 30 + "c" * 34]  # exactly 64 bytes still passes


# --- the client: a member that hangs -------------------------------------------------


def _member(trickling: hung.TricklingServer, **limits: object) -> kube.ApiClient:
    credentials = config.Credentials(server=trickling.url, token="t",
                                     ca_data=trickling.ca.cert_pem)
    return kube.ApiClient(credentials, http=LIBRARY[0], environ={}, name="cluster hung",
                          limits=kube.Limits(**limits))  # type: ignore[arg-type]


@pytest.fixture
async def trickling(env: environment.LocalEnvironment) -> AsyncIterator[hung.TricklingServer]:
    async with hung.TricklingServer(env.ca, interval=0.2) as member:
        yield member


async def test_a_hung_member_costs_one_deadline_per_call_and_is_not_asked_again(
        trickling: hung.TricklingServer) -> None:
    api = _member(trickling, request_timeout=1.0)
    with pytest.raises(errors.DeadlineExceeded) as caught:
        await api.get(resources.NAMESPACES, "default")  # a GET: retries would be allowed
    await api.close()
    message = str(caught.value)
    assert message.startswith(f"cluster hung ({trickling.url}): GET /api/v1/namespaces/default")
    assert "within the 1s request deadline" in message
    assert trickling.requests == 1  # not sent again: the server is slow, not broken


async def test_a_hung_member_holds_its_slots_and_nothing_more(
        trickling: hung.TricklingServer) -> None:
    api = _member(trickling, request_timeout=30.0, max_in_flight=2, stall_after=0.5)
    holding = [asyncio.create_task(api.get(resources.NAMESPACES, "default")) for _ in range(2)]
    try:
        await testkit.eventually(lambda: trickling.requests == 2, 20, "both slots taken",
                                 interval=0.02)
        started = time.monotonic()
        with pytest.raises(errors.Saturated) as caught:
            await api.get(resources.NAMESPACES, "kube-system")
        assert time.monotonic() - started < 10.0  # far less than the 30 s deadline
    finally:
        for task in holding:
            task.cancel()
        await asyncio.gather(*holding, return_exceptions=True)
        await api.close()
    assert caught.value.sent is False
    assert "2 requests to it are in flight" in str(caught.value)
    assert "limit: 2 at once" in str(caught.value)
    assert trickling.requests == 2  # the third was never sent


async def test_a_health_check_has_a_slot_of_its_own(trickling: hung.TricklingServer) -> None:
    """Requests holding every slot neither hold nor refuse a probe; a stuck probe holds the next."""
    api = _member(trickling, request_timeout=30.0, max_in_flight=2, stall_after=0.5)
    holding = [asyncio.create_task(api.get(resources.NAMESPACES, "default")) for _ in range(2)]
    probing: asyncio.Task[object] | None = None
    try:
        await testkit.eventually(lambda: trickling.requests == 2, 20, "both slots taken",
                                 interval=0.02)
        probing = asyncio.create_task(api.request("GET", "/readyz", probe=True))
        await testkit.eventually(lambda: trickling.requests == 3, 20, "the probe sent",
                                 interval=0.02)
        with pytest.raises(errors.Saturated) as caught:
            await api.request("GET", "/readyz", probe=True)
        assert "1 requests to it are in flight" in str(caught.value)
        assert not probing.done()
    finally:
        tasks = [*holding, *([probing] if probing else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await api.close()
    assert trickling.requests == 3  # the second probe was never sent


# --- the client: what must keep working, on a real API server -------------------------


@dataclasses.dataclass
class Big:
    namespace: str
    names: list[str]


BIG_DATA = 900 * 1024
"""Each ConfigMap's data: near the API server's 1 MiB limit for one ConfigMap."""


@pytest.fixture(scope="module")
async def big(env: environment.LocalEnvironment) -> AsyncIterator[Big]:
    """24 ConfigMaps of 900 KiB each (about 22 MiB in one list)."""
    namespace = f"big-{uuid.uuid4().hex[:6]}"
    async with env.client() as api:
        await api.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
        names = [f"cm-{i:02d}" for i in range(24)]
        for name in names:
            await api.create(resources.CONFIGMAPS, {
                "metadata": {"name": name, "namespace": namespace},
                "data": {"blob": "z" * BIG_DATA}})
        try:
            yield Big(namespace, names)
        finally:
            await api.delete(resources.NAMESPACES, namespace, missing_ok=True)


async def test_large_pages_pass_the_defaults_and_a_tight_cap_asks_for_fewer(
        env: environment.LocalEnvironment, big: Big, caplog: pytest.LogCaptureFixture) -> None:
    async with env.client(http=LIBRARY[0]) as api:
        listed = await api.list(resources.CONFIGMAPS, namespace=big.namespace)
    assert kube.names(listed["items"]) == big.names  # one page of about 22 MiB
    tight = kube.Limits(max_response_bytes=4 * 1024 * 1024)
    async with env.client(http=LIBRARY[0], limits=tight) as api:
        listed = await api.list(resources.CONFIGMAPS, namespace=big.namespace)
        assert kube.names(listed["items"]) == big.names  # the same, in pages of 3
        with pytest.raises(errors.TooLarge, match="larger than 4 MiB"):
            await api.request("GET", resources.CONFIGMAPS.path(namespace=big.namespace))
    assert "asking for 3 at a time" in caplog.text


async def test_large_watch_events_pass_the_default_and_a_tight_cap_says_so(
        env: environment.LocalEnvironment, big: Big) -> None:
    async def first_event(api: kube.ApiClient) -> kube.WatchEvent:
        async for event in api.watch(resources.CONFIGMAPS, namespace=big.namespace,
                                     resource_version="0", timeout_seconds=5):
            return event
        raise AssertionError("no event")

    async with env.client(http=LIBRARY[0]) as api:
        event = await first_event(api)
    assert len(event.object["data"]["blob"]) == BIG_DATA
    tight = kube.Limits(max_watch_line_bytes=512 * 1024)
    async with env.client(http=LIBRARY[0], limits=tight) as api:
        with pytest.raises(errors.TooLarge, match="an event larger than 512 KiB"):
            await first_event(api)


async def test_a_burst_on_a_healthy_server_waits_for_slots_and_all_succeed(
        env: environment.LocalEnvironment) -> None:
    one_at_a_time = kube.Limits(max_in_flight=1, stall_after=5.0)
    async with env.client("member1", http=LIBRARY[0], limits=one_at_a_time) as api:
        answers = await asyncio.gather(*(api.get(resources.NAMESPACES, "default")
                                         for _ in range(30)))
        assert not api.busy
    assert {a["metadata"]["name"] for a in answers} == {"default"}
