"""Writes over bare HTTP/1.1 connections (``kube.http1``) against small real loopback servers.

What the aiohttp transport relies on when it sends a request with a body this way:
the request as sent, the answer in each framing an API server uses, the connection
kept only when that is safe, and the ``sent`` split of errors that decides retries.
"""

from __future__ import annotations

import asyncio

import pytest

import testkit
from clusterhealth_core.kube import aiohttp_transport, http1, transport

LIMIT = 1024


def connections(url: str, *, clock: float = 0.0) -> http1.Connections:
    now = [clock]
    pool = http1.Connections(url, None, connect_timeout=5, user_agent="test/1",
                             max_response_bytes=LIMIT, clock=lambda: now[0])
    pool.now = now  # type: ignore[attr-defined]  # moved by tests that age idle connections
    return pool


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request's head and its ``Content-Length`` body."""
    head = await testkit.read_head(reader)
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head, await reader.readexactly(length) if length else b""


def answering(*answers: bytes, seen: list[tuple[bytes, bytes]] | None = None,
              opened: list[None] | None = None) -> testkit.Handler:
    """A handler answering the requests of each connection with ``answers`` in turn, then
    closing it."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if opened is not None:
            opened.append(None)
        for answer in answers:
            request = await read_request(reader)
            if not request[0]:
                break
            if seen is not None:
                seen.append(request)
            writer.write(answer)
            await writer.drain()
        writer.close()
    return handle


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


async def test_the_request_as_sent_and_one_connection_for_several() -> None:
    seen: list[tuple[bytes, bytes]] = []
    opened: list[None] = []
    async with testkit.loopback_server(answering(OK, OK, seen=seen, opened=opened)) as url:
        pool = connections(url + "/prefix/")
        first = await pool.request("PUT", "/apis/x/v1/things/a/status", {"fieldManager": "m e"},
                                   [("Content-Type", "application/json")], b'{"a":1}', 5)
        second = await pool.request("POST", "/api/v1/events", None, [], b"{}", 5)
        await pool.close()
    assert (first.status, first.body, second.body) == (200, b"{}", b"{}")
    assert first.headers["content-type"] == first.headers["Content-Type"] == "application/json"
    head, body = seen[0]
    lines = head.decode().split("\r\n")
    assert lines[0] == "PUT /prefix/apis/x/v1/things/a/status?fieldManager=m+e HTTP/1.1"
    assert {"Host: " + url.removeprefix("http://"), "User-Agent: test/1",
            "Content-Length: 7", "Content-Type: application/json"} <= set(lines)
    assert body == b'{"a":1}' and seen[1][1] == b"{}"
    assert len(opened) == 1  # the second request went on the first's connection


async def test_a_chunked_answer_with_extensions_and_trailers() -> None:
    chunked = (b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n")
    opened: list[None] = []
    async with testkit.loopback_server(answering(chunked, OK, opened=opened)) as url:
        pool = connections(url)
        answer = await pool.request("POST", "/x", None, [], b"{}", 5)
        again = await pool.request("POST", "/x", None, [], b"{}", 5)
        await pool.close()
    assert (answer.status, answer.body, again.body) == (201, b"hello world", b"{}")
    assert len(opened) == 1  # read to its end: the connection was used again


@pytest.mark.parametrize(("answer", "served"), [
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}", 2),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", 2),
    (b"HTTP/1.1 200 OK\r\n\r\n{}", 1),  # no length: the body ends with the connection
], ids=["connection-close", "http-1.0", "until-closed"])
async def test_a_connection_the_server_ends_is_not_used_again(answer: bytes, served: int) -> None:
    # the first two servers would answer a second request on the same connection: only the
    # client's reading of the answer keeps it from sending one there
    opened: list[None] = []
    async with testkit.loopback_server(answering(*[answer] * served, opened=opened)) as url:
        pool = connections(url)
        assert (await pool.request("PATCH", "/x", None, [], b"{}", 5)).body == b"{}"
        assert (await pool.request("PATCH", "/x", None, [], b"{}", 5)).body == b"{}"
        await pool.close()
    assert len(opened) == 2


async def test_an_idle_connection_closed_by_the_server_or_too_old_is_replaced() -> None:
    opened: list[None] = []
    async with testkit.loopback_server(answering(OK, OK, opened=opened)) as url:
        pool = connections(url)
        await pool.request("PUT", "/x", None, [], b"{}", 5)
        pool.now[0] += transport.POOL_KEEPALIVE_EXPIRY  # type: ignore[attr-defined]
        await pool.request("PUT", "/x", None, [], b"{}", 5)  # idle too long: a new one
        await pool.close()
    assert len(opened) == 2
    opened.clear()
    async with testkit.loopback_server(answering(OK, opened=opened)) as url:
        pool = connections(url)
        await pool.request("PUT", "/x", None, [], b"{}", 5)
        await asyncio.sleep(0.05)  # the server closed it meanwhile
        assert (await pool.request("PUT", "/x", None, [], b"{}", 5)).body == b"{}"
        await pool.close()
    assert len(opened) == 2


async def test_nothing_listening_is_an_error_before_sending() -> None:
    async with testkit.loopback_server(answering()) as url:
        pass  # closed: nothing listens on the port any more
    pool = connections(url)
    with pytest.raises(transport.TransportError) as caught:
        await pool.request("POST", "/x", None, [], b"{}", 5)
    assert caught.value.sent is False and transport.refused(caught.value)


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",  # then the server hangs up
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
    b"SSH-2.0-OpenSSH_9.2\r\n",
    b"",
], ids=["short-body", "short-chunk", "not-http", "nothing"])
async def test_a_broken_answer_is_an_error_after_sending(answer: bytes) -> None:
    async with testkit.loopback_server(answering(answer)) as url:
        pool = connections(url)
        with pytest.raises(transport.TransportError) as caught:
            await pool.request("POST", "/x", None, [], b"{}", 5)
        await pool.close()
    assert caught.value.sent is True  # it may have reached the server: not sent again blindly


async def test_no_answer_within_the_read_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await reader.read()  # never answers; ends when the client hangs up
        writer.close()

    async with testkit.loopback_server(silent) as url:
        pool = connections(url)
        with pytest.raises(transport.TransportError, match="read timeout") as caught:
            await pool.request("PUT", "/x", None, [], b"{}", 0.1)
        await pool.close()
    assert caught.value.sent is True


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + b"x" * 2048,
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"200\r\n" + b"x" * 512
    + b"\r\n" + b"200\r\n" + b"x" * 512 + b"\r\n" + b"10\r\n" + b"x" * 16 + b"\r\n0\r\n\r\n",
], ids=["declared", "one-chunk", "chunks-add-up"])
async def test_an_answer_above_the_limit_is_too_large(answer: bytes) -> None:
    async with testkit.loopback_server(answering(answer)) as url:
        pool = connections(url)
        with pytest.raises(transport.TooLarge):
            await pool.request("POST", "/x", None, [], b"{}", 5)
        await pool.close()


async def test_the_aiohttp_transport_sends_writes_this_way_and_reads_through_aiohttp() -> None:
    seen: list[tuple[bytes, bytes]] = []
    async with testkit.loopback_server(answering(OK, OK, seen=seen)) as url:
        http = aiohttp_transport.AiohttpTransport(url, None, user_agent="ua/2")
        written = await http.request("PUT", "/w", body=b"{}")
        read = await http.request("GET", "/r")
        await http.close()
    assert (written.body, read.body) == (b"{}", b"{}")
    assert [head.split(b"\r\n")[0] for head, _ in seen] == [b"PUT /w HTTP/1.1",
                                                            b"GET /r HTTP/1.1"]
    # aiohttp names itself nowhere: the User-Agent is the caller's on both paths
    assert all(b"User-Agent: ua/2" in head for head, _ in seen)


async def test_with_a_proxy_the_writes_go_through_aiohttp_too() -> None:
    proxied = aiohttp_transport.AiohttpTransport(
        "http://127.0.0.1:1", None, proxy=transport.Proxy("http://127.0.0.1:2"))
    assert proxied._writes is None
    direct = aiohttp_transport.AiohttpTransport("http://127.0.0.1:1", None)
    assert isinstance(direct._writes, http1.Connections)


async def test_every_connection_gets_the_transports_socket_options() -> None:
    async with testkit.loopback_server(answering(OK)) as url:
        pool = connections(url)
        connection = await pool._acquire()
        sock = connection.writer.get_extra_info("socket")
        found = [(level, option, sock.getsockopt(level, option))
                 for level, option, _ in transport.socket_options()]
        connection.close()
        await pool.close()
    assert found == transport.socket_options()  # keepalive probes, TCP_USER_TIMEOUT
