"""Test hosts: network namespaces with a veth link to this machine.

Kubernetes refuses loopback addresses in EndpointSlices, so backends that a
load balancer reaches through a member's EndpointSlices need addresses of
their own.  A :class:`TestHost` is a network namespace made by the test run
itself, joined to the root namespace by a veth pair (``198.18.<n>.1`` on
this side, ``198.18.<n>.2`` inside): traffic to it never leaves the machine.
The addresses come from 198.18.0.0/15, which RFC 2544 reserves for testing
network equipment: no real network uses it, unlike the private 10/8 that a
machine's own network may route.  Test hosts keep ``198.18.128.0/17``
(``n`` in :data:`INDEXES`): the Nodes of :mod:`.nodenet` use
``198.18.64.0/18``, pod networks (:mod:`.podnet`) ``198.19.0.0/16``.  Needs
root and iproute2.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

INDEXES = range(128, 255)
"""A test host's ``n``: 198.18.128.0/17, apart from the Nodes' and the pod networks' ranges."""


class NetnsError(RuntimeError):
    """A namespace could not be made; the message says why."""


def ip(*args: str, check: bool = True, error: type[Exception] = NetnsError,
       what: str = "test hosts") -> str:
    """Run ``ip`` and return its output; when it fails (``check``), ``error`` says why.

    ``what`` names what needs it in the message (it needs root and iproute2).
    """
    binary = shutil.which("ip") or "/usr/sbin/ip"
    try:
        proc = subprocess.run([binary, *args], capture_output=True, text=True, check=False,
                              timeout=30)
    except OSError as exc:
        raise error(f"ip {' '.join(args)}: {exc} (install iproute2)") from exc
    if check and proc.returncode != 0:
        raise error(f"ip {' '.join(args)} failed: {proc.stderr.strip()} "
                    f"({what} need root and iproute2)")
    return proc.stdout


def _ip(*args: str, check: bool = True) -> str:
    return ip(*args, check=check)


def join(namespace: str, host_link: str, ns_link: str, host_address: str,
         ns_address: str) -> None:
    """Make ``namespace`` and a veth pair into it, each end addressed (``a.b.c.d/len``) and up.

    The caller removes what is left when this fails (``ip netns del``, ``ip link del``).
    """
    _ip("netns", "add", namespace)
    _ip("link", "add", host_link, "type", "veth", "peer", "name", ns_link)
    _ip("link", "set", ns_link, "netns", namespace)
    _ip("addr", "add", host_address, "dev", host_link)
    _ip("link", "set", host_link, "up")
    for args in (("addr", "add", ns_address, "dev", ns_link), ("link", "set", ns_link, "up"),
                 ("link", "set", "lo", "up")):
        _ip("-n", namespace, *args)


class TestHost:
    """One namespace ``ch-<name>`` reachable at :attr:`address`."""

    def __init__(self, name: str, index: int) -> None:
        if index not in INDEXES:
            raise ValueError(f"index must be {INDEXES.start}..{INDEXES.stop - 1}")
        self.namespace = f"ch-{name}"
        self.index = index
        self.host_link = f"chh{index}"
        self.ns_link = f"chn{index}"
        self.host_address = f"198.18.{index}.1"
        self.address = f"198.18.{index}.2"

    def create(self) -> TestHost:
        """Make the namespace and its link (replacing leftovers of an aborted run)."""
        self.destroy()
        try:
            join(self.namespace, self.host_link, self.ns_link, f"{self.host_address}/24",
                 f"{self.address}/24")
        except NetnsError:
            self.destroy()
            raise
        return self

    def destroy(self) -> None:
        """Remove the namespace and its link (no error when they are gone)."""
        _ip("netns", "del", self.namespace, check=False)
        _ip("link", "del", self.host_link, check=False)

    def argv(self, command: Sequence[str]) -> list[str]:
        """``command`` run inside the namespace."""
        return [shutil.which("ip") or "/usr/sbin/ip", "netns", "exec", self.namespace,
                *command]
