"""A pod network: Pod IPs that servers can listen on, and that never leave this machine.

Kubernetes refuses loopback addresses in EndpointSlices (``may not be in the
loopback range``), so Pods whose IPs come from 127/8 are never listed as a
Service's endpoints, and a load balancer that reads EndpointSlices (the MCI
provider) never sees them.  For traffic to follow Pods, kwok must give them
addresses that are not loopback, and something must answer there.

A :class:`PodNetwork` is a network namespace made by this process in which
the Pod ranges are local ("AnyIP": a ``local`` route, so a server may listen
on any address of a range without configuring each one), joined to this
machine by a veth pair and a route to the ranges.  HAProxy on this machine
connects to a Pod IP and reaches the server listening there; nothing is
routed anywhere else.  :meth:`PodNetwork.listen` creates a listening socket
inside the namespace (``setns`` in a short-lived thread: a socket keeps the
namespace it was made in, and the caller's event loop serves it).

Addresses come from 198.19.0.0/16, half of the range RFC 2544 reserves for
testing network equipment (no real network uses it; :mod:`.netns` test hosts
use the other half, 198.18.0.0/16).  A network is one block
``198.19.<8k>.0/21``: member N (1..6) has ``198.19.<8k+N>.0/24``, the link
``198.19.<8k+7>.0/30``; ``k`` is the first of 0..31 with no route on this
machine, so runs side by side do not collide.  Needs root and iproute2 (as
:mod:`.netns`).  A network left behind by a killed process is removed by the
next :func:`create` (its name carries the dead process's pid).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pathlib
import socket
import threading

from clusterhealth_localenv import netns, processes

CLONE_NEWNET = 0x40000000
NETNS_DIR = pathlib.Path("/var/run/netns")
PREFIX = "chp-"
BLOCKS = range(32)
"""Block k is 198.19.<8k>.0/21."""
MEMBERS_PER_BLOCK = 6
LINK = 7
"""The block's /24 whose first /30 is the veth link."""


class PodNetworkError(RuntimeError):
    """The network could not be made; the message says why (root and iproute2 needed)."""


def _ip(*args: str, check: bool = True) -> str:
    return netns.ip(*args, check=check, error=PodNetworkError, what="pod networks")


class PodNetwork:
    """One namespace ``chp-<pid>`` holding the Pod ranges ``198.19.<8k+N>.0/24``."""

    def __init__(self, block: int, owner: int | None = None) -> None:
        if block not in BLOCKS:
            raise ValueError(f"block must be in {BLOCKS.start}..{BLOCKS.stop - 1}")
        self.block = block
        self.owner = os.getpid() if owner is None else owner
        self.namespace = f"{PREFIX}{self.owner}"
        self.host_link = f"chp{self.owner}h"
        self.ns_link = f"chp{self.owner}n"
        self.host_address = f"198.19.{8 * block + LINK}.1"
        self.ns_address = f"198.19.{8 * block + LINK}.2"
        self.ranges: list[str] = []

    def pod_cidr(self, index: int) -> str:
        """The Pod range of member number ``index`` (1..6)."""
        if not 1 <= index <= MEMBERS_PER_BLOCK:
            raise ValueError(f"index must be 1..{MEMBERS_PER_BLOCK}")
        return f"198.19.{8 * self.block + index}.0/24"

    @property
    def network(self) -> str:
        """Every address this network may use."""
        return f"198.19.{8 * self.block}.0/21"

    def create(self, indexes: list[int]) -> PodNetwork:
        """Make the namespace, the link, and the Pod ranges of the given members."""
        self.destroy()
        try:
            netns.join(self.namespace, self.host_link, self.ns_link, f"{self.host_address}/30",
                       f"{self.ns_address}/30")
            self.ranges = [self.pod_cidr(i) for i in indexes]
            for cidr in self.ranges:
                _ip("-n", self.namespace, "route", "add", "local", cidr, "dev", "lo")
            _ip("route", "add", self.network, "via", self.ns_address, "dev", self.host_link)
        except (PodNetworkError, netns.NetnsError, OSError) as exc:
            self.destroy()
            if isinstance(exc, PodNetworkError):
                raise
            raise PodNetworkError(f"{exc} (the pod network needs root and iproute2)") from exc
        return self

    def destroy(self) -> None:
        """Remove the namespace, the link and the route (no error when they are gone)."""
        _ip("link", "del", self.host_link, check=False)
        _ip("netns", "del", self.namespace, check=False)

    def listen(self, address: str, port: int, backlog: int = 128) -> socket.socket:
        """A non-blocking listening TCP socket on ``address:port`` inside the namespace."""
        result: dict[str, object] = {}

        def inside() -> None:  # setns changes this thread only, and the thread ends here
            try:
                libc = ctypes.CDLL("libc.so.6", use_errno=True)
                fd = os.open(NETNS_DIR / self.namespace, os.O_RDONLY)
                try:
                    if libc.setns(fd, CLONE_NEWNET) != 0:
                        errno = ctypes.get_errno()
                        raise OSError(errno, f"setns {self.namespace}: {os.strerror(errno)}")
                finally:
                    os.close(fd)
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind((address, port))
                    sock.listen(backlog)
                    sock.setblocking(False)
                except OSError:
                    sock.close()
                    raise
                result["socket"] = sock
            except OSError as exc:
                result["error"] = exc

        thread = threading.Thread(target=inside, name=f"listen-{address}")
        thread.start()
        thread.join()
        error = result.get("error")
        if isinstance(error, OSError):
            raise error
        sock = result["socket"]
        assert isinstance(sock, socket.socket)
        return sock


def sweep() -> list[str]:
    """Remove pod networks whose process has ended; return their names."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in NETNS_DIR.iterdir():
            owner = entry.name.removeprefix(PREFIX)
            if entry.name.startswith(PREFIX) and owner.isdigit() \
                    and not processes.alive(int(owner)):
                PodNetwork(BLOCKS.start, int(owner)).destroy()
                removed.append(entry.name)
    return removed


def create(indexes: list[int]) -> PodNetwork:
    """A new pod network for members ``indexes`` (1..6), on the first free block."""
    if os.geteuid() != 0:
        raise PodNetworkError("the pod network (a network namespace) needs root")
    sweep()
    for block in BLOCKS:
        network = PodNetwork(block)
        if not _ip("-4", "route", "show", "root", network.network).strip() and \
                not _ip("-4", "addr", "show", "to", network.network).strip():
            return network.create(indexes)
    raise PodNetworkError(f"no free block of 198.19.0.0/16 for a pod network "
                          f"({len(BLOCKS)} in use)")
