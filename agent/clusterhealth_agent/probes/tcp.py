"""The TCP probe: can this node open a connection to ``host:port``?

For dependencies that speak no HTTP (a database, a message broker): the
probe only proves that the three-way handshake completes, and tells a
refused connection (nothing listens; the peer is up) from every other
failure (no route, filtered, timeout via the runner's deadline).
"""

from __future__ import annotations

import asyncio
import contextlib

from clusterhealth_agent.probes import base

REASON_CONNECTED = "Connected"
REASON_CONNECTION_REFUSED = "ConnectionRefused"
REASON_CONNECTION_FAILED = "ConnectionFailed"


def format_address(host: str, port: int) -> str:
    """``host:port``, with brackets around an IPv6 address."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class TCPProbe(base.Probe):
    """Connect to ``host:port`` and close the connection at once."""

    kind = "tcp"

    def __init__(self, name: str, condition_type: str, host: str, port: int) -> None:
        super().__init__(name, condition_type)
        if not host:
            raise ValueError(f"TCP probe {name}: no host")
        if not 0 < port <= 65535:
            raise ValueError(f"TCP probe {name}: port {port} is not in 1-65535")
        self.host = host
        self.port = port

    async def check(self) -> base.ProbeResult:
        """One connection attempt."""
        address = format_address(self.host, self.port)
        try:
            _, writer = await asyncio.open_connection(self.host, self.port)
        except ConnectionRefusedError:
            return base.ProbeResult(
                False, REASON_CONNECTION_REFUSED, f"connect to {address}: connection refused"
            )
        except OSError as exc:
            return base.ProbeResult(
                False, REASON_CONNECTION_FAILED, f"connect to {address}: {exc or repr(exc)}"
            )
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return base.ProbeResult(True, REASON_CONNECTED, f"connected to {address}")
