"""A member API server that hangs: it accepts, then answers one byte at a time, forever.

The worst member for a controller is not one that is down (connecting fails
at once) but one that accepts connections and then trickles: every read
gets a byte before its timeout, so only an overall deadline ends the
request.  :class:`TricklingServer` is such a member, a real TCP server on
loopback speaking TLS with a certificate from the environment's CA (so the
client gets through the handshake and waits on HTTP): for every request it
writes a status line, headers and then a chunked body of blanks, one byte
every ``interval`` seconds, until the client goes away.

:meth:`TricklingServer.register` makes it a ``Cluster`` of a control plane,
with a Secret holding the CA bundle and a token as Karmada's members have.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import pathlib
import ssl
import tempfile
from typing import Any

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import pki

SECRET_NAMESPACE = "karmada-cluster"
_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n")
_CHUNK = b"1\r\n \r\n"


class TricklingServer:
    """HTTPS on ``host``: reads each request, then answers a byte every ``interval`` seconds."""

    def __init__(self, ca: pki.CertificateAuthority, *, host: str = "127.0.0.1",
                 interval: float = 1.0) -> None:
        self.ca = ca
        self.host = host
        self.interval = interval
        self.port = 0
        self.accepted = 0
        """Connections accepted so far."""
        self.requests = 0
        """Requests read so far (each then trickled)."""
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._directory: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        """``https://host:port``."""
        return f"https://{self.host}:{self.port}"

    @property
    def open_connections(self) -> int:
        """Connections being trickled to right now."""
        return len(self._handlers)

    def _tls(self) -> ssl.SSLContext:
        self._directory = tempfile.TemporaryDirectory(prefix="clusterhealth-hung-")
        pair = self.ca.serving("hung-member", [self.host], ["localhost"])
        cert, key = pair.write(pathlib.Path(self._directory.name), "serving")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        return context

    async def start(self) -> None:
        """Listen on a free port of ``host``."""
        self._server = await asyncio.start_server(self._accept, self.host, 0, ssl=self._tls())
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._server.wait_closed()
            self._server = None
        if self._directory is not None:
            self._directory.cleanup()
            self._directory = None

    async def __aenter__(self) -> TricklingServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = await reader.readline()
                if not line:
                    return
                head += line
            self.requests += 1
            await self._trickle(writer)
        except (ConnectionError, OSError, ssl.SSLError):
            pass  # the client gave up: what it should do
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1):
                    await writer.wait_closed()

    async def _trickle(self, writer: asyncio.StreamWriter) -> None:
        body = _HEAD
        sent = 0
        while True:
            if sent == len(body):
                body, sent = _CHUNK, 0  # an endless body of one-byte chunks
            writer.write(body[sent:sent + 1])
            sent += 1
            await writer.drain()
            await asyncio.sleep(self.interval)

    async def register(self, api: kube.ApiClient, name: str, *,
                       token: str = "hung-member-token") -> dict[str, Any]:
        """Create Cluster ``name`` (and its Secret) pointing at this server; return the Cluster."""
        with contextlib.suppress(errors.Conflict):
            await api.create(resources.NAMESPACES, {"metadata": {"name": SECRET_NAMESPACE}})
        secret = {"metadata": {"name": name, "namespace": SECRET_NAMESPACE}, "type": "Opaque",
                  "data": {"caBundle": base64.b64encode(self.ca.cert_pem).decode(),
                           "token": base64.b64encode(token.encode()).decode()}}
        with contextlib.suppress(errors.Conflict):
            await api.create(resources.SECRETS, secret)
        cluster: dict[str, Any] = await api.create(resources.CLUSTERS, {
            "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"apiEndpoint": self.url, "syncMode": "Push",
                     "secretRef": {"namespace": SECRET_NAMESPACE, "name": name}}})
        return cluster

    async def unregister(self, api: kube.ApiClient, name: str) -> None:
        """Delete what :meth:`register` created."""
        await api.delete(resources.CLUSTERS, name, missing_ok=True)
        await api.delete(resources.SECRETS, name, namespace=SECRET_NAMESPACE, missing_ok=True)
