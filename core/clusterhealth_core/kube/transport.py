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
* no deadline for a whole body, only for each read (``read_timeout``), so a
  large list or a long watch is never cut while bytes keep arriving;
* :class:`TransportError` with ``sent``: ``False`` when the request certainly
  never reached the server (connecting failed, no connection from the pool),
  so callers retry only what is safe to repeat.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Literal, Protocol

import httpx

Headers = Sequence[tuple[str, str]]
Library = Literal["httpx", "aiohttp"]
"""The HTTP library under a client: httpx (smaller: the agent) or aiohttp (less CPU a request:
controllers writing thousands of objects); ``docs/decisions/0004-aiohttp-for-controllers.md``."""
LIBRARIES: tuple[Library, ...] = ("httpx", "aiohttp")

KEEPALIVE_IDLE = 15
KEEPALIVE_INTERVAL = 5
KEEPALIVE_COUNT = 6
DEAD_PEER_SECONDS = KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_COUNT
"""An unanswering peer fails the connection after this long (45 s)."""
POOL_KEEPALIVE_EXPIRY = 30.0
"""Idle pooled connections are closed after this long (the API server keeps them ~90 s)."""


class TransportError(OSError):
    """The connection failed or the peer broke the HTTP protocol.

    ``sent`` is ``False`` only when the request certainly did not reach the
    server; then any request, even a ``POST``, may be sent again.
    """

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


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
                      read_timeout: float | None = 30.0) -> Response:
        """Send one request and read the whole response."""

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


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


# httpx errors raised before any byte of the request was written.
_NOT_SENT: tuple[type[Exception], ...] = (
    httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ProxyError,
)


def _translate(exc: httpx.HTTPError | ssl.SSLError | OSError, target: str) -> TransportError:
    if isinstance(exc, _NOT_SENT):
        return TransportError(f"cannot connect to {target}: {_describe(exc)}", sent=False)
    return TransportError(f"{target}: {_describe(exc)}", sent=True)


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


class StreamResponse:
    """A response whose body is read incrementally, line by line (watch streams)."""

    def __init__(self, response: httpx.Response, target: str) -> None:
        self._response = response
        self._target = target
        self.status = response.status_code
        self.headers: Mapping[str, str] = response.headers

    async def read_all(self) -> bytes:
        """The rest of the body."""
        try:
            return await self._response.aread()
        except (httpx.HTTPError, OSError) as exc:
            raise _translate(exc, self._target) from exc

    async def lines(self) -> AsyncIterator[str]:
        """Yield each line of the body; every read is bounded by the stream's idle timeout.

        A body that ends without a final newline yields its last partial line
        too; callers parsing JSON must expect it to be incomplete.
        """
        try:
            async for line in self._response.aiter_lines():
                yield line
        except httpx.ReadTimeout as exc:
            raise TimeoutError(f"{self._target}: no data for the idle timeout") from exc
        except (httpx.HTTPError, OSError) as exc:
            raise _translate(exc, self._target) from exc


def split_base_url(base_url: str) -> tuple[str, str]:
    """``(base URL without a trailing slash, "host:port")``; ValueError without a host."""
    parsed = urllib.parse.urlsplit(base_url)
    if parsed.hostname is None:
        raise ValueError(f"no host in {base_url!r}")
    default_port = 443 if parsed.scheme == "https" else 80
    return base_url.rstrip("/"), f"{parsed.hostname}:{parsed.port or default_port}"


class HttpTransport:
    """Requests to one ``http(s)://host:port[/prefix]`` through one connection pool."""

    def __init__(
        self,
        base_url: str,
        ssl_context: ssl.SSLContext | None,
        *,
        proxy: Proxy | None = None,
        max_connections: int = 16,
        connect_timeout: float = 10.0,
        user_agent: str = "clusterhealth",
    ) -> None:
        self.base_url, self.target = split_base_url(base_url)
        self.proxy = proxy
        self.connect_timeout = connect_timeout
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

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        headers: Headers = (),
        body: bytes | None = None,
        read_timeout: float | None = 30.0,
    ) -> Response:
        """Send one request and read the whole response (each read within ``read_timeout``)."""
        request = self._build(method, path, query, headers, body, read_timeout)
        try:
            response = await self._client.send(request)
        except (httpx.HTTPError, ssl.SSLError, OSError) as exc:
            raise _translate(exc, self.target) from exc
        return Response(response.status_code, response.headers, response.content)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        headers: Headers = (),
        idle_timeout: float | None = None,
    ) -> AsyncIterator[StreamResponse]:
        """Send a request and yield the response with its body still to be read."""
        request = self._build(method, path, query, headers, None, idle_timeout)
        try:
            response = await self._client.send(request, stream=True)
        except (httpx.HTTPError, ssl.SSLError, OSError) as exc:
            raise _translate(exc, self.target) from exc
        try:
            yield StreamResponse(response, self.target)
        finally:
            await response.aclose()

    async def close(self) -> None:
        """Close every pooled connection."""
        await self._client.aclose()
