"""Writes to an API server over kept-alive HTTP/1.1 connections, without a client library.

The aiohttp transport (:mod:`clusterhealth_core.kube.aiohttp_transport`) sends
the requests that carry a body (create, update, patch, apply) through here when
no proxy is set; reads, lists and watches stay on aiohttp.  A write and its
answer are small, and aiohttp's client spent more CPU on each than the exchange
itself.  Beside Karmada's remedy controller, sent this way, the remedy controller's
part of a condition flip (by the API server's audit clock) went from 1.05 to 1.09x
of Karmada's to 0.80 to 0.88x, and its CPU per flip from 1.01 to 1.03x to 0.85x
(docs/decisions/0014-writes-over-bare-http1.md).

What is kept of the transport's promises:

* TLS with the caller's context (its server name too), TCP keepalive probes and
  ``TCP_USER_TIMEOUT`` on every socket (:func:`transport.socket_options`);
* connecting bounded by ``connect_timeout``; the answer (status line, headers and
  body together) by ``read_timeout``; the whole exchange by the caller's deadline;
* a body above ``max_response_bytes`` is :class:`transport.TooLarge`, headers
  above :data:`MAX_HEAD_BYTES` an error;
* :class:`transport.TransportError` with ``sent`` False only when connecting
  failed (nothing reached the server), so callers send again only what is safe;
* a connection is used again only when its answer was read to the end, the server
  did not ask to close it, it has not been closed since, and it has been idle for
  less than :data:`transport.POOL_KEEPALIVE_EXPIRY`.

HTTP/1.1 only as an API server speaks it to a client: ``Content-Length`` or
chunked bodies, no ``Expect: 100-continue``, no trailers kept, no redirects.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator, Mapping

from clusterhealth_core.kube import transport

MAX_HEAD_BYTES = 64 * 1024
"""Status line and headers of one answer, at most (a longer line is an error)."""
NO_BODY_STATUSES = frozenset({204, 304})


class Headers(Mapping[str, str]):
    """An answer's headers, found by any case (a repeated header: its last value)."""

    __slots__ = ("_values",)

    def __init__(self, values: dict[str, str]) -> None:
        self._values = values
        """Lower-cased names to values."""

    def __getitem__(self, name: str) -> str:
        return self._values[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values


class _Connection:
    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def reusable(self, now: float) -> bool:
        """Open on both sides, nothing unread, and idle for less than the pool's expiry."""
        return (not self.writer.is_closing() and not self.reader.at_eof()
                and now - self.idle_since < transport.POOL_KEEPALIVE_EXPIRY)

    def close(self) -> None:
        self.writer.close()


class Connections:
    """Kept-alive HTTP/1.1 connections to one ``http(s)://host:port[/prefix]``."""

    def __init__(self, base_url: str, ssl_context: ssl.SSLContext | None, *,
                 connect_timeout: float, user_agent: str, max_response_bytes: int,
                 max_idle: int = 16, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.hostname is None:
            raise ValueError(f"no host in {base_url!r}")
        self.host = parsed.hostname
        self.port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.target = f"{self.host}:{self.port}"
        self.prefix = parsed.path.rstrip("/")
        self.ssl = ssl_context if parsed.scheme == "https" else None
        if parsed.scheme == "https" and ssl_context is None:
            raise ValueError(f"{base_url}: https needs a TLS context")
        self.connect_timeout = connect_timeout
        self.max_response_bytes = max_response_bytes
        self.max_idle = max_idle
        self._clock = clock
        self._fixed = (f"Host: {parsed.netloc}\r\nUser-Agent: {user_agent}\r\n"
                       "Accept-Encoding: identity\r\n")
        self._idle: list[_Connection] = []
        self._closed = False

    async def request(self, method: str, path: str, query: Mapping[str, str] | None,
                      headers: transport.Headers, body: bytes | None,
                      read_timeout: float | None) -> transport.Response:
        """Send one request on an idle connection (or a new one) and read its whole answer."""
        connection = await self._acquire()
        data = body or b""
        target = self.prefix + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        head = [f"{method} {target} HTTP/1.1\r\n", self._fixed,
                f"Content-Length: {len(data)}\r\n"]
        head += [f"{name}: {value}\r\n" for name, value in headers]
        head.append("\r\n")
        try:
            connection.writer.write("".join(head).encode("latin-1") + data)
            async with asyncio.timeout(read_timeout):
                status, found, answer, keep = await self._answer(connection.reader, method)
        except BaseException as exc:
            connection.close()  # whatever was left unread would be taken for the next answer
            if not isinstance(exc, Exception) or isinstance(exc, transport.TransportError):
                raise  # cancelled (the caller's deadline), too large
            raise self._failed(exc, f"{method} {path}") from exc
        if keep and not self._closed and len(self._idle) < self.max_idle:
            connection.idle_since = self._clock()
            self._idle.append(connection)
        else:
            connection.close()
        return transport.Response(status, found, answer)

    async def close(self) -> None:
        """Close every idle connection; those in use close when their answer is read."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
        for connection in idle:
            with contextlib.suppress(Exception):
                await connection.writer.wait_closed()

    # --- internals -------------------------------------------------------

    async def _acquire(self) -> _Connection:
        now = self._clock()
        while self._idle:
            connection = self._idle.pop()  # the most recently used: the least likely closed
            if connection.reusable(now):
                return connection
            connection.close()
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=self.ssl, limit=MAX_HEAD_BYTES,
                    server_hostname=self.host if self.ssl is not None else None)
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise transport.TransportError(
                f"cannot connect to {self.target}: {transport.describe(exc)}",
                sent=False) from exc
        sock = writer.get_extra_info("socket")
        with contextlib.suppress(OSError, AttributeError):
            for level, option, value in transport.socket_options():
                sock.setsockopt(level, option, value)
        return _Connection(reader, writer)

    async def _answer(self, reader: asyncio.StreamReader, method: str
                      ) -> tuple[int, Headers, bytes, bool]:
        """Status, headers, body, and whether the connection may carry another request."""
        line = await reader.readuntil(b"\r\n")
        version, _, rest = line.decode("latin-1").partition(" ")
        if not version.startswith("HTTP/1."):
            raise ValueError(f"not an HTTP/1.x answer: {line[:80]!r}")
        status = int(rest[:3])
        values: dict[str, str] = {}
        while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.decode("latin-1").partition(":")
            values[name.strip().lower()] = value.strip()
        found = Headers(values)
        keep = version == "HTTP/1.1" and "close" not in values.get("connection", "").lower()
        if method == "HEAD" or status in NO_BODY_STATUSES or 100 <= status < 200:
            return status, found, b"", keep
        if "chunked" in values.get("transfer-encoding", "").lower():
            return status, found, await self._chunked(reader), keep
        if "content-length" in values:
            transport.check_length(found, self.max_response_bytes, self.target)
            return status, found, await reader.readexactly(int(values["content-length"])), keep
        # neither: the body ends when the server closes the connection
        return status, found, await self._until_closed(reader), False

    async def _chunked(self, reader: asyncio.StreamReader) -> bytes:
        async def chunks() -> AsyncIterator[bytes]:
            while size := int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16):
                if size > self.max_response_bytes:  # before reading it
                    raise transport.TooLarge(self.target, "response body",
                                             self.max_response_bytes)
                yield await reader.readexactly(size)
                await reader.readexactly(2)  # the chunk's CRLF
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailers: none kept
        return await transport.collect(chunks(), self.max_response_bytes, self.target)

    async def _until_closed(self, reader: asyncio.StreamReader) -> bytes:
        async def chunks() -> AsyncIterator[bytes]:
            while chunk := await reader.read(1 << 16):
                yield chunk
        return await transport.collect(chunks(), self.max_response_bytes, self.target)

    def _failed(self, exc: BaseException, what: str) -> transport.TransportError:
        if isinstance(exc, transport.TransportError):
            return exc
        if isinstance(exc, asyncio.IncompleteReadError):
            why = "the server closed the connection before its answer was complete"
        elif isinstance(exc, TimeoutError):
            why = "no complete answer within the read timeout"
        else:
            why = transport.describe(exc)
        return transport.TransportError(f"{self.target}: {what}: {why}", sent=True)
