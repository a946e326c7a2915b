"""The kube transport on aiohttp, for measuring the agent with it (decision 0002).

Benchmark-only: it implements what :class:`clusterhealth_core.kube.transport.HttpTransport`
offers the client (``request``, ``stream``, ``close``, ``proxy``, ``target``)
on an ``aiohttp.ClientSession`` with the same pooling, timeouts and proxy
settings, so that an agent process can run on it unchanged
(``python -m bench.agent_aiohttp`` swaps the class in before the agent
starts).  The product uses httpx; this exists so the choice rests on a
measurement of a working agent, not on import sizes.
"""

from __future__ import annotations

import contextlib
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp

from clusterhealth_core.kube import transport


class _Stream:
    def __init__(self, response: aiohttp.ClientResponse, target: str,
                 idle_timeout: float | None) -> None:
        self._response = response
        self._target = target
        self._idle = idle_timeout
        self.status = response.status
        self.headers: Mapping[str, str] = {k.lower(): v for k, v in response.headers.items()}

    async def read_all(self) -> bytes:
        try:
            return await self._response.read()
        except (aiohttp.ClientError, OSError) as exc:
            raise transport.TransportError(f"{self._target}: {exc}", sent=True) from exc

    async def lines(self) -> AsyncIterator[str]:
        buffer = b""
        try:
            while True:
                chunk = await self._response.content.readany()
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    yield line.decode()
        except (aiohttp.ClientError, OSError) as exc:
            raise transport.TransportError(f"{self._target}: {exc}", sent=True) from exc
        if buffer:
            yield buffer.decode(errors="replace")


class AiohttpTransport:
    """Requests to one API server through one ``aiohttp.ClientSession``."""

    def __init__(self, base_url: str, ssl_context: ssl.SSLContext | None, *,
                 proxy: transport.Proxy | None = None,
                 max_connections: int = 16, connect_timeout: float = 10.0,
                 user_agent: str = "clusterhealth") -> None:
        parsed = urllib.parse.urlsplit(base_url)
        self.base_url = base_url.rstrip("/")
        self.target = f"{parsed.hostname}:{parsed.port}"
        self.proxy = proxy
        self.connect_timeout = connect_timeout
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else False
        self._limit = max_connections
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None

    def _get(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._limit, keepalive_timeout=30,
                                             ssl=self._ssl)
            self._session = aiohttp.ClientSession(
                connector=connector, headers={"User-Agent": self._user_agent},
                auto_decompress=False, trust_env=False)
        return self._session

    def _kwargs(self, query: Mapping[str, str] | None, headers: transport.Headers,
                read_timeout: float | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "params": dict(query) if query else None,
            "headers": list(headers),
            "timeout": aiohttp.ClientTimeout(total=None, connect=self.connect_timeout,
                                             sock_read=read_timeout),
        }
        if self.proxy is not None:
            kwargs["proxy"] = self.proxy.url
            kwargs["proxy_headers"] = dict(self.proxy.headers)
        return kwargs

    async def request(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
                      headers: transport.Headers = (), body: bytes | None = None,
                      read_timeout: float | None = 30.0) -> transport.Response:
        try:
            async with self._get().request(method, self.base_url + path, data=body,
                                           **self._kwargs(query, headers, read_timeout)) as resp:
                data = await resp.read()
                return transport.Response(resp.status,
                                          {k.lower(): v for k, v in resp.headers.items()}, data)
        except (aiohttp.ClientConnectorError, aiohttp.ClientProxyConnectionError) as exc:
            raise transport.TransportError(f"cannot connect to {self.target}: {exc}",
                                           sent=False) from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise transport.TransportError(f"{self.target}: {exc}", sent=True) from exc

    @contextlib.asynccontextmanager
    async def stream(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
                     headers: transport.Headers = (),
                     idle_timeout: float | None = None) -> AsyncIterator[_Stream]:
        try:
            response = await self._get().request(method, self.base_url + path,
                                                 **self._kwargs(query, headers, idle_timeout))
        except (aiohttp.ClientError, OSError) as exc:
            raise transport.TransportError(f"{self.target}: {exc}", sent=False) from exc
        try:
            yield _Stream(response, self.target, idle_timeout)
        finally:
            response.release()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
