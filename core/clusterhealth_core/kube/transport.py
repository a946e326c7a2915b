"""HTTP/1.1 over asyncio streams: just what the Kubernetes API needs, and small.

The agent runs on every node, so its footprint matters: aiohttp alone adds
about 14 MiB of RSS to a process (``docs/decisions/0001-kube-client.md``).
The API server speaks plain HTTP/1.1 with JSON bodies, ``Content-Length`` or
chunked responses, and long-lived chunked streams for watches; this module
implements exactly that, with a small keep-alive pool per server.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Mapping

_MAX_HEADER_BYTES = 64 * 1024
_STREAM_LIMIT = 16 * 1024 * 1024  # one watch event may be large (a big object)


class TransportError(OSError):
    """The connection failed or the peer broke the HTTP protocol."""


@dataclasses.dataclass
class Response:
    """A complete response."""

    status: int
    headers: dict[str, str]
    body: bytes


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False

    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class StreamResponse:
    """A response whose body is read incrementally, line by line (watch streams)."""

    def __init__(self, status: int, headers: dict[str, str], conn: _Connection) -> None:
        self.status = status
        self.headers = headers
        self._conn = conn
        self._chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        self._remaining = int(headers.get("content-length", "-1"))
        self._done = False

    async def read_all(self) -> bytes:
        """The rest of the body."""
        parts = []
        while (chunk := await self._next_chunk()) is not None:
            parts.append(chunk)
        return b"".join(parts)

    async def _next_chunk(self) -> bytes | None:
        if self._done:
            return None
        reader = self._conn.reader
        if self._chunked:
            size_line = await reader.readline()
            if not size_line:
                raise TransportError("connection closed inside a chunked body")
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError as exc:
                raise TransportError(f"bad chunk size {size_line!r}") from exc
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                self._done = True
                return None
            data = await reader.readexactly(size)
            await reader.readexactly(2)
            return data
        if self._remaining >= 0:
            if self._remaining == 0:
                self._done = True
                return None
            data = await reader.read(min(self._remaining, 65536))
            if not data:
                raise TransportError("connection closed before the end of the body")
            self._remaining -= len(data)
            return data
        data = await reader.read(65536)
        if not data:
            self._done = True
            return None
        return data

    async def lines(self, idle_timeout: float | None = None) -> AsyncIterator[bytes]:
        """Yield each newline-terminated line of the body.

        ``idle_timeout`` bounds the wait for each piece of the body
        (:class:`TimeoutError` when the peer goes silent).
        """
        buffer = b""
        while True:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a
            # cancellation that arrives as the inner read completes (CPython gh-86296),
            # which left informers running after their controller was cancelled.
            async with asyncio.timeout(idle_timeout):
                chunk = await self._next_chunk()
            if chunk is None:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                yield line
        if buffer:
            yield buffer

    @property
    def complete(self) -> bool:
        """Whether the whole body has been read."""
        return self._done


class HttpTransport:
    """Requests to one ``http(s)://host:port`` with a keep-alive connection pool."""

    def __init__(
        self,
        base_url: str,
        ssl_context: ssl.SSLContext | None,
        *,
        max_idle: int = 4,
        user_agent: str = "clusterhealth",
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.hostname is None:
            raise ValueError(f"no host in {base_url!r}")
        self.host = parsed.hostname
        self.port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.prefix = parsed.path.rstrip("/")
        self.ssl_context = ssl_context if parsed.scheme == "https" else None
        host_header = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = f"{host_header}:{self.port}"
        self.user_agent = user_agent
        self._idle: list[_Connection] = []
        self._max_idle = max_idle

    async def _connect(self) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(
                self.host, self.port, ssl=self.ssl_context,
                server_hostname=self.host if self.ssl_context is not None else None,
                limit=_STREAM_LIMIT,
            )
        except ssl.SSLError as exc:
            raise TransportError(f"TLS handshake with {self.host_header} failed: {exc}") from exc
        except OSError as exc:
            raise TransportError(f"cannot connect to {self.host_header}: {exc}") from exc
        return _Connection(reader, writer)

    async def _acquire(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                conn.reused = True
                return conn
            conn.close()
        return await self._connect()

    def _release(self, conn: _Connection, response: StreamResponse) -> None:
        keep = (
            response.complete
            and response.headers.get("connection", "").lower() != "close"
            and conn.usable()
            and len(self._idle) < self._max_idle
        )
        if keep:
            self._idle.append(conn)
        else:
            conn.close()

    def _encode(
        self, method: str, path: str, query: Mapping[str, str] | None,
        headers: Mapping[str, str], body: bytes | None,
    ) -> bytes:
        target = self.prefix + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        lines = [
            f"{method} {target} HTTP/1.1",
            f"Host: {self.host_header}",
            f"User-Agent: {self.user_agent}",
            "Accept-Encoding: identity",
        ]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head + (body or b"")

    async def _send(
        self, conn: _Connection, request: bytes
    ) -> StreamResponse:
        conn.writer.write(request)
        await conn.writer.drain()
        status_line = await conn.reader.readline()
        if not status_line:
            raise TransportError("connection closed before a response")
        parts = status_line.decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise TransportError(f"not an HTTP/1.x response: {status_line[:80]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        size = 0
        while True:
            line = await conn.reader.readline()
            size += len(line)
            if size > _MAX_HEADER_BYTES:
                raise TransportError("response headers too large")
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise TransportError("connection closed inside the headers")
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return StreamResponse(status, headers, conn)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
    ) -> Response:
        """Send one request and read the whole response."""
        raw = self._encode(method, path, query, headers or {}, body)
        for _ in range(2):
            conn = await self._acquire()
            try:
                response = await self._send(conn, raw)
                data = await response.read_all()
            except (OSError, asyncio.IncompleteReadError, TransportError) as exc:
                conn.close()
                if conn.reused:
                    continue  # the server closed an idle keep-alive connection: retry fresh
                raise TransportError(str(exc) or exc.__class__.__name__) from exc
            except BaseException:
                conn.close()
                raise
            self._release(conn, response)
            return Response(response.status, response.headers, data)
        raise TransportError("connection closed twice before a response")

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[StreamResponse]:
        """Send a request on a dedicated connection and yield the streaming response.

        ``timeout`` bounds connecting and reading the response headers.
        """
        raw = self._encode(method, path, query, headers or {}, None)
        conn: _Connection | None = None
        try:
            async with asyncio.timeout(timeout):
                conn = await self._connect()
                response = await self._send(conn, raw)
        except (OSError, asyncio.IncompleteReadError) as exc:
            if conn is not None:
                conn.close()
            raise TransportError(str(exc) or exc.__class__.__name__) from exc
        try:
            yield response
        finally:
            conn.close()

    async def close(self) -> None:
        """Close every idle connection."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
