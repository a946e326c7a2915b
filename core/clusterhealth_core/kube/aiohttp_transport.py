"""HTTP to one API server on aiohttp, for controllers whose work is many small writes.

The same promises as :mod:`clusterhealth_core.kube.transport` (httpx), which
the agent keeps because it is smaller; this one costs a third of httpx's CPU
per request (0.5 ms against 1.5 ms, measured: ``docs/decisions/0004-aiohttp-for-controllers.md``),
which is what a remedy controller writing 5,000 Clusters' status spends its
time on.  Chosen per client with ``ApiClient(http="aiohttp")``; aiohttp is
imported only by a process that chooses it.

* one ``aiohttp.ClientSession`` (one connection pool) per API server, TLS
  with the caller's context (its server name too), an optional proxy with
  ``CONNECT`` headers;
* TCP keepalive probes and ``TCP_USER_TIMEOUT`` on every socket (the same
  options as the httpx transport);
* every read bounded by ``read_timeout``, the whole exchange by the caller's
  ``deadline``; response bodies and watch lines capped (the same limits and
  errors as the httpx transport: ``DeadlineExceeded``, ``TooLarge``);
* ``Accept-Encoding: identity`` and no decompression: bodies are what the
  API server wrote;
* :class:`~clusterhealth_core.kube.transport.TransportError` with ``sent``
  ``False`` only when connecting (to the server or through the proxy)
  failed, so callers retry only what is safe to repeat.

Requests that carry a body (the writes) go over :mod:`clusterhealth_core.kube.http1`'s
kept-alive connections instead, with the same promises, unless a proxy is set: aiohttp's
client cost more CPU per write than the exchange itself (decision 0014).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp

from clusterhealth_core.kube import http1, transport

_READ_CHUNK = 1 << 16
_SHARED_TIMEOUTS = 16
"""Distinct read timeouts whose ``ClientTimeout`` a transport keeps (callers use two or three)."""

# aiohttp errors raised before any byte of the request was written: connecting
# failed (refused, TLS handshake, DNS, proxy CONNECT) or timed out.
_NOT_SENT: tuple[type[Exception], ...] = (
    aiohttp.ClientConnectorError, aiohttp.ClientProxyConnectionError,
    aiohttp.ConnectionTimeoutError,
)


def _translate(exc: BaseException, target: str) -> transport.TransportError:
    if isinstance(exc, _NOT_SENT):
        return transport.TransportError(f"cannot connect to {target}: {transport.describe(exc)}",
                                        sent=False)
    return transport.TransportError(f"{target}: {transport.describe(exc)}", sent=True)


_ERRORS = (aiohttp.ClientError, ssl.SSLError, OSError, TimeoutError)


def _keepalive_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """A socket with the transport's keepalive and user-timeout options set."""
    family, kind, proto = addr_info[0], addr_info[1], addr_info[2]
    sock = socket.socket(family, kind, proto)
    try:
        for level, option, value in transport.socket_options():
            sock.setsockopt(level, option, value)
    except OSError:
        sock.close()
        raise
    return sock


class StreamResponse(transport.BodyStream):
    """An aiohttp response whose body is still to be read."""

    _ERRORS = _ERRORS
    _IDLE = aiohttp.SocketTimeoutError

    def __init__(self, response: aiohttp.ClientResponse, target: str, *, max_body: int,
                 max_line: int) -> None:
        # aiohttp's headers are case-insensitive already: no lower-cased copy
        super().__init__(response.status, response.headers, target, max_body=max_body,
                         max_line=max_line)
        self._response = response

    def _chunks(self) -> AsyncIterator[bytes]:
        return self._response.content.iter_any()

    def _translate(self, exc: BaseException) -> transport.TransportError:
        return _translate(exc, self._target)


class AiohttpTransport(transport.PooledTransport[aiohttp.ClientResponse]):
    """Requests to one ``http(s)://host:port[/prefix]`` through one aiohttp session."""

    _ERRORS = _ERRORS

    def __init__(
        self,
        base_url: str,
        ssl_context: ssl.SSLContext | None,
        *,
        proxy: transport.Proxy | None = None,
        max_connections: int | None = 16,
        connect_timeout: float = 10.0,
        user_agent: str = "clusterhealth",
        max_response_bytes: int = transport.MAX_RESPONSE_BYTES,
        max_line_bytes: int = transport.MAX_LINE_BYTES,
    ) -> None:
        super().__init__(base_url, proxy=proxy, connect_timeout=connect_timeout,
                         max_response_bytes=max_response_bytes, max_line_bytes=max_line_bytes)
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else False
        self._max_connections = max_connections
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[float | None, aiohttp.ClientTimeout] = {}
        plain = ssl_context is None and base_url.startswith("https:")  # aiohttp's ssl=False
        self._writes = None if proxy is not None or plain else http1.Connections(
            self.base_url, ssl_context, connect_timeout=connect_timeout, user_agent=user_agent,
            max_response_bytes=max_response_bytes, max_idle=max_connections or 16)
        """Where requests with a body go (:mod:`~clusterhealth_core.kube.http1`); None: a
        proxy is set (or https without a context), and everything goes through aiohttp."""

    def _client(self) -> aiohttp.ClientSession:
        # made on first use: a session belongs to the running loop
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections or 0, limit_per_host=0,
                keepalive_timeout=transport.POOL_KEEPALIVE_EXPIRY, ssl=self._ssl,
                socket_factory=_keepalive_socket, use_dns_cache=False)
            # API servers set no cookies: the default jar would filter (an empty set of)
            # cookies for every request
            self._session = aiohttp.ClientSession(
                connector=connector, trust_env=False, auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                headers={"User-Agent": self._user_agent, "Accept-Encoding": "identity"})
        return self._session

    def _timeout(self, read_timeout: float | None) -> aiohttp.ClientTimeout:
        """The (immutable, so shared) timeout of requests whose reads wait ``read_timeout``."""
        found = self._timeouts.get(read_timeout)
        if found is None:
            found = aiohttp.ClientTimeout(total=None, connect=self.connect_timeout,
                                          sock_read=read_timeout)
            if len(self._timeouts) < _SHARED_TIMEOUTS:  # a caller's every value: not kept
                self._timeouts[read_timeout] = found
        return found

    def _options(self, query: Mapping[str, str] | None, headers: transport.Headers,
                 read_timeout: float | None) -> dict[str, Any]:
        options: dict[str, Any] = {
            "params": dict(query) if query else None,
            "headers": list(headers),
            "timeout": self._timeout(read_timeout),
            "allow_redirects": False,
        }
        if self.proxy is not None:
            options["proxy"] = self.proxy.url
            if self.proxy.headers:
                options["proxy_headers"] = dict(self.proxy.headers)
        return options

    async def _exchange(self, method: str, path: str, query: Mapping[str, str] | None,
                        headers: transport.Headers, body: bytes | None,
                        read_timeout: float | None) -> transport.Response:
        if body is not None and self._writes is not None:
            return await self._writes.request(method, path, query, headers, body, read_timeout)
        async with self._client().request(method, self.base_url + path, data=body,
                                          **self._options(query, headers, read_timeout)
                                          ) as response:
            found = response.headers  # case-insensitive already: no lower-cased copy
            transport.check_length(found, self.max_response_bytes, self.target)
            if response.content_length is not None:  # within the limit (checked above)
                data = await response.read()
            else:
                data = await transport.collect(response.content.iter_any(),
                                               self.max_response_bytes, self.target)
            return transport.Response(response.status, found, data)

    async def _send(self, method: str, path: str, query: Mapping[str, str] | None,
                    headers: transport.Headers,
                    idle_timeout: float | None) -> aiohttp.ClientResponse:
        return await self._client().request(
            method, self.base_url + path, **self._options(query, headers, idle_timeout))

    def _body_stream(self, response: aiohttp.ClientResponse) -> transport.BodyStream:
        return StreamResponse(response, self.target, max_body=self.max_response_bytes,
                              max_line=self.max_line_bytes)

    async def _release(self, response: aiohttp.ClientResponse) -> None:
        response.release()  # aiohttp closes a connection whose body was not read to the end

    def _translate(self, exc: BaseException) -> transport.TransportError:
        return _translate(exc, self.target)

    async def close(self) -> None:
        """Close every pooled connection."""
        if self._writes is not None:
            await self._writes.close()
        if self._session is not None:
            await self._session.close()
            self._session = None
