"""HTTP to one API server, on httpx: pooling, TLS, proxies, dead-peer detection.

The HTTP work itself is httpx's (why httpx and not aiohttp:
``docs/decisions/0002-http-library.md``).  This module adds what talking to
API servers for days needs and turns httpx's exceptions into one error type
that says whether the request may have reached the server:

* one connection pool per API server, TLS with the caller's context, an
  optional proxy (with ``CONNECT`` headers for Karmada's
  ``Cluster.spec.proxyHeader``);
* TCP keepalive probes and ``TCP_USER_TIMEOUT`` on every socket, so a peer
  that vanished (node gone, network cut) fails the connection within
  :data:`DEAD_PEER_SECONDS` even on an idle watch;
* two clocks on a request: every read waits at most ``read_timeout``, and
  the whole exchange (connecting, sending, the whole body) at most the
  caller's ``deadline`` (:class:`DeadlineExceeded`), so a server that trickles
  a byte a second cannot hold the caller; a watch stream has no deadline,
  only its idle timeout (a long watch is never cut while events arrive);
* caps on what a server can make us hold: a response body larger than
  ``max_response_bytes`` and a watch line longer than ``max_line_bytes`` are
  :class:`TooLarge` (the defaults fit a 500-object page of 256 KiB objects
  and client-go's 16 MiB watch frame);
* :class:`TransportError` with ``sent``: ``False`` when the request certainly
  never reached the server (connecting failed, no connection from the pool),
  so callers retry only what is safe to repeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import ssl
import types
import urllib.parse
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import ClassVar, Generic, Literal, Protocol, TypeVar

import httpx

Headers = Sequence[tuple[str, str]]
Library = Literal["httpx", "aiohttp"]
"""The HTTP library under a client: httpx (smaller: the agent) or aiohttp (less CPU a request:
controllers writing thousands of objects); ``docs/decisions/0004-aiohttp-for-controllers.md``."""
LIBRARIES: tuple[Library, ...] = ("httpx", "aiohttp")
R = TypeVar("R")
"""A transport's client library's response."""

KEEPALIVE_IDLE = 15
KEEPALIVE_INTERVAL = 5
KEEPALIVE_COUNT = 6
DEAD_PEER_SECONDS = KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_COUNT
"""An unanswering peer fails the connection after this long (45 s)."""
POOL_KEEPALIVE_EXPIRY = 30.0
"""Idle pooled connections are closed after this long (the API server keeps them ~90 s)."""
MIB = 1 << 20
MAX_RESPONSE_BYTES = 128 * MIB
"""Largest response body read (a 500-object list page of 256 KiB objects; larger pages are
asked for again with fewer objects by ``ApiClient.list_pages``)."""
MAX_LINE_BYTES = 16 * MIB
"""Longest watch line read: client-go's limit for one watch event, ten times etcd's 1.5 MiB
object limit (an object's JSON may be larger than what etcd stores)."""


class TransportError(OSError):
    """The connection failed or the peer broke the HTTP protocol.

    ``sent`` is ``False`` only when the request certainly did not reach the
    server; then any request, even a ``POST``, may be sent again.
    """

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class DeadlineExceeded(TransportError):
    """The whole exchange took longer than the caller's deadline (it may have been received)."""

    def __init__(self, target: str, deadline: float) -> None:
        super().__init__(f"{target}: no complete answer within {deadline:g}s", sent=True)
        self.deadline = deadline


class TooLarge(TransportError):
    """A response body or a watch line went past its cap; the connection is dropped."""

    def __init__(self, target: str, what: str, limit: int) -> None:
        super().__init__(f"{target}: {what} larger than {describe_size(limit)}", sent=True)
        self.limit = limit


def describe_size(size: int) -> str:
    """``128 MiB``, ``512 KiB`` or ``100 bytes``."""
    for unit, name in ((MIB, "MiB"), (1024, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"


def check_length(headers: Mapping[str, str], limit: int, target: str) -> None:
    """Refuse a body whose ``Content-Length`` already says it is too large."""
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(target, f"response body ({declared} bytes)", limit)


async def collect(chunks: AsyncIterator[bytes], limit: int, target: str) -> bytes:
    """The concatenated ``chunks``; :class:`TooLarge` once they exceed ``limit`` bytes."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise TooLarge(target, "response body", limit)
        parts.append(chunk)
    return b"".join(parts)


class LineSplitter:
    """Cuts a byte stream into lines, refusing a line longer than ``limit`` bytes."""

    def __init__(self, limit: int, target: str) -> None:
        self.limit = limit
        self.target = target
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[str]:
        """The lines completed by ``chunk``."""
        start = len(self._buffer)
        self._buffer += chunk
        lines: list[str] = []
        begin = 0
        while (end := self._buffer.find(b"\n", start)) >= 0:
            if end - begin > self.limit:
                raise TooLarge(self.target, "a watch line", self.limit)
            lines.append(self._buffer[begin:end].decode(errors="replace"))
            begin = start = end + 1
        if begin:
            del self._buffer[:begin]
        if len(self._buffer) > self.limit:
            raise TooLarge(self.target, "a watch line", self.limit)
        return lines

    def rest(self) -> str | None:
        """The last line, when the stream ended without a newline."""
        return self._buffer.decode(errors="replace") if self._buffer else None


class deadline_of:  # noqa: N801 (used as a function: ``async with deadline_of(...)``)
    """Raise :class:`DeadlineExceeded` when the body takes longer than ``seconds`` (None: never).

    A class rather than an ``asynccontextmanager``: it is entered once per request, and a
    generator-based manager costs a controller's write path several times as much.
    """

    __slots__ = ("_scope", "_seconds", "_target")

    def __init__(self, seconds: float | None, target: str) -> None:
        self._seconds = seconds
        self._target = target
        self._scope = asyncio.timeout(seconds)

    async def __aenter__(self) -> None:
        await self._scope.__aenter__()

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: types.TracebackType | None) -> None:
        try:
            await self._scope.__aexit__(kind, exc, tb)
        except TimeoutError as timeout:
            if self._seconds is not None and self._scope.expired():
                raise DeadlineExceeded(self._target, self._seconds) from timeout
            raise


@dataclasses.dataclass
class Response:
    """A complete response."""

    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclasses.dataclass(frozen=True)
class Proxy:
    """An HTTP(S) proxy and the headers to send it with ``CONNECT``."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()


class Streamed(Protocol):
    """A response whose body is still to be read."""

    status: int
    headers: Mapping[str, str]

    async def read_all(self) -> bytes:
        """The rest of the body."""

    def lines(self) -> AsyncIterator[str]:
        """Each line of the body, every read bounded by the idle timeout."""


class Transport(Protocol):
    """What the client needs of an HTTP library: this module's or ``aiohttp_transport``'s."""

    target: str
    proxy: Proxy | None

    async def request(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
                      headers: Headers = (), body: bytes | None = None,
                      read_timeout: float | None = 30.0,
                      deadline: float | None = None) -> Response:
        """Send one request and read the whole response, all within ``deadline`` seconds."""

    def stream(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
               headers: Headers = (), idle_timeout: float | None = None
               ) -> contextlib.AbstractAsyncContextManager[Streamed]:
        """Send a request; the context yields the response with its body still to be read."""

    async def close(self) -> None:
        """Close every pooled connection."""


def socket_options() -> list[tuple[int, int, int]]:
    """Keepalive probes and ``TCP_USER_TIMEOUT`` for every socket to an API server."""
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE), ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
                        ("TCP_KEEPCNT", KEEPALIVE_COUNT),
                        ("TCP_USER_TIMEOUT", DEAD_PEER_SECONDS * 1000)):
        if hasattr(socket, name):  # Linux has all; other systems get what they offer
            options.append((socket.IPPROTO_TCP, int(getattr(socket, name)), value))
    return options


def describe(exc: BaseException) -> str:
    """``ExceptionClass: message`` (the class alone for an empty message)."""
    text = str(exc)
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


# httpx errors raised before any byte of the request was written.
_NOT_SENT: tuple[type[Exception], ...] = (
    httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ProxyError,
)


def _translate(exc: BaseException, target: str) -> TransportError:
    if isinstance(exc, _NOT_SENT):
        return TransportError(f"cannot connect to {target}: {describe(exc)}", sent=False)
    return TransportError(f"{target}: {describe(exc)}", sent=True)


def refused(exc: BaseException) -> bool:
    """Whether a connection failure was an active refusal (nothing listens there)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return True
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
    return False


class BodyStream:
    """A response whose body is read incrementally, line by line (watch streams).

    What both transports share: the body's size and line bounds and how a read fails.
    A transport's subclass gives its client library's raw chunks (:meth:`_chunks`), the
    library's errors (``_ERRORS``, turned into :class:`TransportError` by
    :meth:`_translate`) and its read timeout (``_IDLE``: no data for the idle timeout).
    """

    _ERRORS: ClassVar[tuple[type[BaseException], ...]]
    _IDLE: ClassVar[type[BaseException]]

    def __init__(self, status: int, headers: Mapping[str, str], target: str, *,
                 max_body: int, max_line: int) -> None:
        self.status = status
        self.headers = headers
        self._target = target
        self._max_body = max_body
        self._max_line = max_line

    def _chunks(self) -> AsyncIterator[bytes]:
        raise NotImplementedError

    def _translate(self, exc: BaseException) -> TransportError:
        raise NotImplementedError

    async def read_all(self) -> bytes:
        """The rest of the body (at most the transport's ``max_response_bytes``)."""
        try:
            check_length(self.headers, self._max_body, self._target)
            return await collect(self._chunks(), self._max_body, self._target)
        except TransportError:
            raise
        except self._ERRORS as exc:
            raise self._translate(exc) from exc

    async def lines(self) -> AsyncIterator[str]:
        """Yield each line of the body; every read is bounded by the stream's idle timeout.

        A line longer than the transport's ``max_line_bytes`` is :class:`TooLarge`.
        A body that ends without a final newline yields its last partial line
        too; callers parsing JSON must expect it to be incomplete.
        """
        splitter = LineSplitter(self._max_line, self._target)
        try:
            async for chunk in self._chunks():
                for line in splitter.feed(chunk):
                    yield line
        except TransportError:
            raise
        except self._IDLE as exc:
            raise TimeoutError(f"{self._target}: no data for the idle timeout") from exc
        except self._ERRORS as exc:
            raise self._translate(exc) from exc
        last = splitter.rest()
        if last is not None:
            yield last


class StreamResponse(BodyStream):
    """An httpx response whose body is still to be read."""

    _ERRORS = (httpx.HTTPError, OSError)
    _IDLE = httpx.ReadTimeout

    def __init__(self, response: httpx.Response, target: str, *, max_body: int,
                 max_line: int) -> None:
        super().__init__(response.status_code, response.headers, target, max_body=max_body,
                         max_line=max_line)
        self._response = response

    def _chunks(self) -> AsyncIterator[bytes]:
        return self._response.aiter_raw()

    def _translate(self, exc: BaseException) -> TransportError:
        return _translate(exc, self._target)


def split_base_url(base_url: str) -> tuple[str, str]:
    """``(base URL without a trailing slash, "host:port")``; ValueError without a host."""
    parsed = urllib.parse.urlsplit(base_url)
    if parsed.hostname is None:
        raise ValueError(f"no host in {base_url!r}")
    default_port = 443 if parsed.scheme == "https" else 80
    return base_url.rstrip("/"), f"{parsed.hostname}:{parsed.port or default_port}"


class PooledTransport(Generic[R]):
    """What both transports share: their bounds, the request and stream protocol, the error split.

    A subclass gives its client library's exchange of one whole request
    (:meth:`_exchange`), the sending of a streamed one (:meth:`_send`), its
    response as a :class:`BodyStream` (:meth:`_body_stream`) and its release
    (:meth:`_release`), and the library's errors (``_ERRORS``, turned into a
    :class:`TransportError` by :meth:`_translate`).
    """

    _ERRORS: ClassVar[tuple[type[BaseException], ...]]

    def __init__(self, base_url: str, *, proxy: Proxy | None, connect_timeout: float,
                 max_response_bytes: int, max_line_bytes: int) -> None:
        self.base_url, self.target = split_base_url(base_url)
        self.proxy = proxy
        self.connect_timeout = connect_timeout
        self.max_response_bytes = max_response_bytes
        self.max_line_bytes = max_line_bytes

    async def _exchange(self, method: str, path: str, query: Mapping[str, str] | None,
                        headers: Headers, body: bytes | None,
                        read_timeout: float | None) -> Response:
        raise NotImplementedError

    async def _send(self, method: str, path: str, query: Mapping[str, str] | None,
                    headers: Headers, idle_timeout: float | None) -> R:
        raise NotImplementedError

    def _body_stream(self, response: R) -> BodyStream:
        raise NotImplementedError

    async def _release(self, response: R) -> None:
        raise NotImplementedError

    def _translate(self, exc: BaseException) -> TransportError:
        raise NotImplementedError

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        headers: Headers = (),
        body: bytes | None = None,
        read_timeout: float | None = 30.0,
        deadline: float | None = None,
    ) -> Response:
        """Send one request and read the whole response.

        Each read waits at most ``read_timeout``; everything together at most
        ``deadline`` seconds (:class:`DeadlineExceeded`).  A body larger than
        ``max_response_bytes`` is :class:`TooLarge`.
        """
        try:
            async with deadline_of(deadline, self.target):
                return await self._exchange(method, path, query, headers, body, read_timeout)
        except TransportError:
            raise
        except self._ERRORS as exc:
            raise self._translate(exc) from exc

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        headers: Headers = (),
        idle_timeout: float | None = None,
    ) -> AsyncIterator[BodyStream]:
        """Send a request and yield the response with its body still to be read."""
        try:
            response = await self._send(method, path, query, headers, idle_timeout)
        except self._ERRORS as exc:
            raise self._translate(exc) from exc
        try:
            yield self._body_stream(response)
        finally:
            await self._release(response)


class HttpTransport(PooledTransport[httpx.Response]):
    """Requests to one ``http(s)://host:port[/prefix]`` through one connection pool."""

    _ERRORS = (httpx.HTTPError, OSError)

    def __init__(
        self,
        base_url: str,
        ssl_context: ssl.SSLContext | None,
        *,
        proxy: Proxy | None = None,
        max_connections: int | None = 16,
        connect_timeout: float = 10.0,
        user_agent: str = "clusterhealth",
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        super().__init__(base_url, proxy=proxy, connect_timeout=connect_timeout,
                         max_response_bytes=max_response_bytes, max_line_bytes=max_line_bytes)
        self._client = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(
                # Never httpx's default (it loads certifi's bundle: time and memory);
                # None means plain http, where the context is never used.
                verify=ssl_context if ssl_context is not None else ssl.SSLContext(
                    ssl.PROTOCOL_TLS_CLIENT),
                limits=httpx.Limits(max_connections=max_connections,
                                    max_keepalive_connections=max_connections,
                                    keepalive_expiry=POOL_KEEPALIVE_EXPIRY),
                proxy=httpx.Proxy(proxy.url, headers=list(proxy.headers)) if proxy else None,
                socket_options=socket_options(),
                retries=0,
                trust_env=False,
            ),
            headers={"User-Agent": user_agent, "Accept-Encoding": "identity"},
            trust_env=False,
            follow_redirects=False,
        )

    def _timeout(self, read_timeout: float | None) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect_timeout, read=read_timeout,
                             write=self.connect_timeout, pool=self.connect_timeout)

    def _build(self, method: str, path: str, query: Mapping[str, str] | None,
               headers: Headers, body: bytes | None,
               read_timeout: float | None) -> httpx.Request:
        return self._client.build_request(
            method, self.base_url + path, params=dict(query) if query else None,
            headers=list(headers), content=body, timeout=self._timeout(read_timeout),
        )

    async def _exchange(self, method: str, path: str, query: Mapping[str, str] | None,
                        headers: Headers, body: bytes | None,
                        read_timeout: float | None) -> Response:
        request = self._build(method, path, query, headers, body, read_timeout)
        response = await self._client.send(request, stream=True)
        try:
            check_length(response.headers, self.max_response_bytes, self.target)
            content = await collect(response.aiter_raw(), self.max_response_bytes, self.target)
        finally:
            await response.aclose()
        return Response(response.status_code, response.headers, content)

    async def _send(self, method: str, path: str, query: Mapping[str, str] | None,
                    headers: Headers, idle_timeout: float | None) -> httpx.Response:
        request = self._build(method, path, query, headers, None, idle_timeout)
        return await self._client.send(request, stream=True)

    def _body_stream(self, response: httpx.Response) -> BodyStream:
        return StreamResponse(response, self.target, max_body=self.max_response_bytes,
                              max_line=self.max_line_bytes)

    async def _release(self, response: httpx.Response) -> None:
        await response.aclose()

    def _translate(self, exc: BaseException) -> TransportError:
        return _translate(exc, self.target)

    async def close(self) -> None:
        """Close every pooled connection."""
        await self._client.aclose()
