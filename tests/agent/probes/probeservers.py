"""Helpers for the probe tests: names, a free port, a scripted in-process DNS server."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator
from typing import cast

import dns.flags
import dns.message
import dns.rcode
import dns.rrset

KUBERNETES_DEFAULT = "kubernetes.default.svc.cluster.local."
KUBERNETES_IP = "198.18.0.1"


def closed_port(host: str = "127.0.0.1", kind: int = socket.SOCK_STREAM) -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ScriptedDns:
    """A DNS server (UDP and TCP on one port) answering every query alike.

    ``rcode`` is the response code; with ``truncate`` the UDP reply is an empty
    truncated one, so only a client that retries over TCP gets the addresses.
    """

    def __init__(self, rcode: dns.rcode.Rcode, addresses: list[str], truncate: bool) -> None:
        self.rcode = rcode
        self.addresses = addresses
        self.truncate = truncate
        self.udp_queries = 0
        self.tcp_queries = 0
        self.port = 0

    def answer(self, wire: bytes, over_tcp: bool) -> bytes:
        query = dns.message.from_wire(wire)
        response = dns.message.make_response(query)
        response.set_rcode(self.rcode)
        if self.truncate and not over_tcp:
            response.flags |= dns.flags.TC
        elif self.rcode == dns.rcode.NOERROR and self.addresses:
            response.answer.append(
                dns.rrset.from_text_list(query.question[0].name, 30, "IN", "A", self.addresses)
            )
        return response.to_wire()

    async def handle_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                (size,) = struct.unpack("!H", await reader.readexactly(2))
                wire = await reader.readexactly(size)
                self.tcp_queries += 1
                reply = self.answer(wire, over_tcp=True)
                writer.write(struct.pack("!H", len(reply)) + reply)
                await writer.drain()
        writer.close()


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, server: ScriptedDns) -> None:
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (3.11's selector datagram transport does not subclass DatagramTransport)
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        self.server.udp_queries += 1
        assert self.transport is not None
        self.transport.sendto(self.server.answer(data, over_tcp=False), addr)


@contextlib.asynccontextmanager
async def scripted_dns(
    rcode: dns.rcode.Rcode = dns.rcode.NOERROR,
    addresses: list[str] | None = None,
    truncate: bool = False,
) -> AsyncIterator[ScriptedDns]:
    """Serve a :class:`ScriptedDns` on 127.0.0.1 (built on dnspython's message API)."""
    server = ScriptedDns(rcode, addresses or [], truncate)
    tcp = await asyncio.start_server(server.handle_tcp, "127.0.0.1", 0)
    server.port = int(tcp.sockets[0].getsockname()[1])
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: _Udp(server), local_addr=("127.0.0.1", server.port)
    )
    try:
        yield server
    finally:
        transport.close()
        tcp.close()
        await tcp.wait_closed()
