"""Helpers for the webhook's tests: the server on loopback, HTTPS requests to it.

Certificates live in a :class:`clusterhealth_localenv.pki.SecretVolume` (laid out as
kubelet mounts a Secret), so a rotation in a test is the rotation a pod sees.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
from collections.abc import AsyncIterator
from typing import Any

import prometheus_client
from cryptography import x509

from clusterhealth_controlplane.webhook import decision, metrics, server
from clusterhealth_core import clock as clocks
from clusterhealth_core import serving
from clusterhealth_localenv import pki


class SteppedClock(clocks.Clock):
    """Monotonic time that moves only when the test says so."""

    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t


def issue(ca: pki.CertificateAuthority) -> pki.KeyPair:
    """A serving certificate for loopback (both families) and ``localhost``."""
    return ca.serving("clusterhealth-webhook", ["127.0.0.1", "::1"], ["localhost"])


def serial(pair: pki.KeyPair) -> int:
    return x509.load_pem_x509_certificate(pair.cert_pem).serial_number


def trusting(ca: pki.CertificateAuthority) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=ca.cert_pem.decode())


@dataclasses.dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: bytes,
                   *, method: str = "POST", path: str = server.PATH,
                   keep_alive: bool = False) -> Answer:
    """One HTTP/1.1 request on an open connection, and its answer (Content-Length bodies)."""
    head = (f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n")
    writer.write(head.encode() + body)
    async with asyncio.timeout(10):
        status_line = await reader.readline()
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        payload = await reader.readexactly(int(headers.get("content-length", "0")))
    return Answer(int(status_line.split()[1]), headers, payload)


@contextlib.asynccontextmanager
async def connection(port: int, ca: pki.CertificateAuthority, host: str = "127.0.0.1",
                     ) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter, int]]:
    """A TLS connection to the webhook and the serial of the certificate it was given."""
    async with asyncio.timeout(10):
        reader, writer = await asyncio.open_connection(host, port, ssl=trusting(ca),
                                                       server_hostname="localhost")
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    try:
        yield reader, writer, x509.load_der_x509_certificate(der).serial_number
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()


async def request(port: int, ca: pki.CertificateAuthority, body: bytes, *,
                  host: str = "127.0.0.1", **kwargs: Any) -> tuple[Answer, int]:
    """One request on a new connection: the answer and the certificate's serial."""
    async with connection(port, ca, host) as (reader, writer, served):
        return await exchange(reader, writer, body, **kwargs), served


@contextlib.asynccontextmanager
async def running(volume: pki.SecretVolume, *, defaults: decision.Defaults | None = None,
                  clock: clocks.Clock | None = None, reload_interval: float = 10.0,
                  registry: prometheus_client.CollectorRegistry | None = None,
                  host: str = "127.0.0.1", port: int = 0,
                  **kwargs: Any) -> AsyncIterator[server.WebhookServer]:
    """The webhook server on a free loopback port, stopped afterwards."""
    webhook = server.WebhookServer(
        defaults or decision.Defaults(),
        serving.TLSConfig(volume.cert, volume.key, reload_interval=reload_interval),
        metrics.WebhookMetrics(registry or prometheus_client.CollectorRegistry()),
        host=host, port=port, clock=clock, **kwargs)
    await webhook.start()
    try:
        yield webhook
    finally:
        await webhook.stop()
