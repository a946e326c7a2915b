"""The fixed ``haproxy.cfg`` the HAProxy provider drives at runtime.

HAProxy cannot create frontends, backends or servers through its runtime
API, so the provider works on a layout rendered once (:func:`render`) and
deployed with HAProxy (our chart's sidecar, a user's own HAProxy, the tests):

- one HTTP frontend ``mci`` on :attr:`HAProxyLayout.bind_address`:``bind_port``;
- two map files, ``exact.map`` and ``prefix.map`` (looked up with
  ``map_str`` and ``map_beg``, longest prefix wins), keyed by
  ``<host><path>``, ``*.<domain><path>`` or ``<path>``, whose values are
  backend names -- the route table of
  :mod:`clusterhealth_mci.providers.plan`, tried in the same order;
- a third map, ``slots.map``, never used for routing: ``<slot> -> <mci>|<backend>``
  records which slot serves what, so that a restarted *provider* adopts the
  running HAProxy's slots instead of moving traffic around;
- :attr:`HAProxyLayout.slots` backends ``mci_slot_<i>``, each with
  :attr:`HAProxyLayout.servers_per_slot` servers ``s1..s<M>`` from a
  ``server-template`` at ``0.0.0.0:1``, disabled until the provider sets
  their address, weight and state;
- a default backend ``mci_default`` answering 503;
- an admin ``stats socket`` (``level admin expose-fd listeners``).

Why the settings (``docs/mci-haproxy.md`` has the long version): requests
are balanced one by one (``balance roundrobin`` honours runtime weights;
``no option prefer-last-server``; keep-alive on both sides with the default
``http-reuse safe`` -- a pooled connection is only reused for a server the
balancer picked); nothing sticks a client to a server (no cookies, no
stick tables), so a server in ``drain`` gets no new request while its
in-flight ones finish; ``retries`` with ``option redispatch 1`` send a
request whose connection failed (a just-removed endpoint) to another server.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import pathlib
from typing import Protocol

FRONTEND = "mci"
DEFAULT_BACKEND = "mci_default"
SLOT_PREFIX = "mci_slot_"
SERVER_PREFIX = "s"
EXACT_MAP = "exact.map"
PREFIX_MAP = "prefix.map"
SLOTS_MAP = "slots.map"
MAX_SERVERS_PER_SLOT = 4095
"""HAProxy's roundrobin handles at most 4095 active servers per backend."""


@dataclasses.dataclass(frozen=True)
class HAProxyLayout:
    """Where things are in the rendered configuration, and how big it is."""

    bind_address: str = "0.0.0.0"
    bind_port: int = 80
    admin_socket: str = "/var/run/haproxy/admin.sock"
    """A UNIX socket path, or ``host:port`` for a TCP admin socket (loopback only, please)."""
    map_dir: str = "/etc/haproxy/mci"
    slots: int = 256
    """Backends available: one per (MCI, backend Service) served."""
    servers_per_slot: int = 32
    """Endpoints per backend Service (draining ones included)."""
    advertise: tuple[tuple[str, int], ...] = ()
    """What status reports as the ingress; default: the bind address and port."""
    maxconn: int | None = None
    """Global connection limit; default: what the file-descriptor limit allows."""
    timeout_connect: str = "3s"
    timeout_client: str = "60s"
    timeout_server: str = "60s"
    """Longer than the slowest response: a draining server's requests get this long."""
    timeout_http_request: str = "10s"
    timeout_http_keep_alive: str = "10s"
    timeout_queue: str = "10s"
    retries: int = 3
    retry_on: str = "conn-failure"
    """``conn-failure`` is HAProxy's safe default; ``conn-failure empty-response``
    also retries a request whose pooled connection the server had just closed
    (only for applications where a replay is harmless)."""
    log_stdout: bool = False
    """Log every request to HAProxy's standard output (debugging, tests)."""

    def __post_init__(self) -> None:
        if not 1 <= self.slots <= 100_000:
            raise ValueError(f"slots must be 1..100000, not {self.slots}")
        if not 1 <= self.servers_per_slot <= MAX_SERVERS_PER_SLOT:
            raise ValueError(f"servers_per_slot must be 1..{MAX_SERVERS_PER_SLOT}, "
                             f"not {self.servers_per_slot}")
        if not 0 < self.bind_port < 65536:
            raise ValueError(f"bind_port must be 1..65535, not {self.bind_port}")
        ipaddress.ip_address(self.bind_address)
        for text in (self.admin_socket, self.map_dir):
            if any(c.isspace() for c in text):
                raise ValueError(f"no whitespace allowed in {text!r}")

    @property
    def exact_map(self) -> str:
        """The exact-match map file (its path is its runtime API name)."""
        return str(pathlib.PurePosixPath(self.map_dir) / EXACT_MAP)

    @property
    def prefix_map(self) -> str:
        """The longest-prefix map file."""
        return str(pathlib.PurePosixPath(self.map_dir) / PREFIX_MAP)

    @property
    def slots_map(self) -> str:
        """The slot-ownership map file (bookkeeping only)."""
        return str(pathlib.PurePosixPath(self.map_dir) / SLOTS_MAP)

    @property
    def map_files(self) -> tuple[str, ...]:
        """Every map file; HAProxy 2.6 refuses to start unless they exist."""
        return (self.exact_map, self.prefix_map, self.slots_map)

    @property
    def ingress(self) -> tuple[tuple[str, int], ...]:
        """Where MCIs are served, for their status."""
        return self.advertise or ((self.bind_address, self.bind_port),)

    def slot_name(self, index: int) -> str:
        """The backend of slot ``index`` (0-based)."""
        return f"{SLOT_PREFIX}{index}"

    def slot_index(self, backend: str) -> int | None:
        """The slot of a backend name, or ``None`` if it is not a slot of this layout."""
        if not backend.startswith(SLOT_PREFIX):
            return None
        digits = backend[len(SLOT_PREFIX):]
        if not digits.isdigit() or str(int(digits)) != digits or int(digits) >= self.slots:
            return None
        return int(digits)

    def server_name(self, number: int) -> str:
        """Server ``number`` (1-based, as ``server-template`` numbers them)."""
        return f"{SERVER_PREFIX}{number}"

    def server_number(self, server: str) -> int | None:
        """The number of a server name, or ``None``."""
        digits = server[len(SERVER_PREFIX):]
        if not server.startswith(SERVER_PREFIX) or not digits.isdigit():
            return None
        number = int(digits)
        return number if 1 <= number <= self.servers_per_slot else None

    def admin_socket_bind(self) -> str:
        """The ``stats socket`` address as HAProxy's configuration spells it."""
        if self.admin_socket.startswith("unix@"):
            return self.admin_socket[len("unix@"):]
        if "/" in self.admin_socket:
            return self.admin_socket
        return f"ipv4@{self.admin_socket}"


class LayoutFlags(Protocol):
    """The parsed ``--haproxy-*`` layout flags: the MCI settings, or the config command's."""

    # read-only (properties): the MCI settings are frozen
    @property
    def haproxy_bind_address(self) -> str: ...
    @property
    def haproxy_bind_port(self) -> int: ...
    @property
    def haproxy_socket(self) -> str: ...
    @property
    def haproxy_map_dir(self) -> str: ...
    @property
    def haproxy_slots(self) -> int: ...
    @property
    def haproxy_servers_per_slot(self) -> int: ...


def layout_from(flags: LayoutFlags,
                advertise: tuple[tuple[str, int], ...] = ()) -> HAProxyLayout:
    """The layout the flags describe (``ValueError`` for an impossible one).

    One mapping of the flags for the provider and for the command writing the
    ``haproxy.cfg`` it drives, so that the same values given to both cannot disagree.
    """
    return HAProxyLayout(
        bind_address=flags.haproxy_bind_address, bind_port=flags.haproxy_bind_port,
        admin_socket=flags.haproxy_socket, map_dir=flags.haproxy_map_dir,
        slots=flags.haproxy_slots, servers_per_slot=flags.haproxy_servers_per_slot,
        advertise=advertise)


def render(layout: HAProxyLayout) -> str:
    """The complete ``haproxy.cfg`` for ``layout``."""
    exact, prefix = layout.exact_map, layout.prefix_map
    lines = [
        "# Rendered by clusterhealth_mci.providers.haproxy.config -- the MCI provider",
        "# drives this layout through the runtime API; do not edit by hand.",
        "global",
        f"    stats socket {layout.admin_socket_bind()} mode 600 level admin expose-fd listeners",
        "    stats timeout 2m",
    ]
    if layout.maxconn is not None:
        lines.append(f"    maxconn {layout.maxconn}")
    if layout.log_stdout:
        lines.append("    log stdout format raw local0 info")
    lines += [
        "",
        "defaults",
        "    mode http",
        "    log global" if layout.log_stdout else "    no log",
    ]
    if layout.log_stdout:
        lines.append("    option httplog")
    lines += [
        f"    timeout connect {layout.timeout_connect}",
        f"    timeout client {layout.timeout_client}",
        f"    timeout server {layout.timeout_server}",
        f"    timeout http-request {layout.timeout_http_request}",
        f"    timeout http-keep-alive {layout.timeout_http_keep_alive}",
        f"    timeout queue {layout.timeout_queue}",
        "    # Per-request balancing, keep-alive on both sides; a pooled server",
        "    # connection is only reused for the server the balancer picked.",
        "    option http-keep-alive",
        "    no option prefer-last-server",
        "    http-reuse safe",
        "    # A connection refused by a just-removed endpoint is retried elsewhere.",
        f"    retries {layout.retries}",
        "    option redispatch 1",
        f"    retry-on {layout.retry_on}",
        "    option forwardfor",
        "",
        f"frontend {FRONTEND}",
        f"    bind {_bind(layout.bind_address)}:{layout.bind_port}",
        "    # Keys: <host><path> (host lower case, port dropped), *.<domain><path>, <path>.",
        "    http-request set-var(txn.mci_path) path",
        "    http-request set-var(txn.mci_host) req.fhdr(host),lower,regsub(:[0-9]+$,)",
        "    http-request set-var(txn.mci_wild) var(txn.mci_host),regsub(^[^.]+,*)",
        "    http-request set-var(txn.mci_k1) var(txn.mci_host),concat(,txn.mci_path,)",
        "    http-request set-var(txn.mci_k2) var(txn.mci_wild),concat(,txn.mci_path,)",
        "    # The first match wins: host, wildcard host, any host; exact before longest prefix.",
        f"    http-request set-var(txn.mci_be) var(txn.mci_k1),map_str({exact})",
    ]
    unset = "if !{ var(txn.mci_be) -m found }"
    lines += [
        f"    http-request set-var(txn.mci_be) var(txn.mci_k1),map_beg({prefix}) {unset}",
        f"    http-request set-var(txn.mci_be) var(txn.mci_k2),map_str({exact}) {unset}",
        f"    http-request set-var(txn.mci_be) var(txn.mci_k2),map_beg({prefix}) {unset}",
        f"    http-request set-var(txn.mci_be) path,map_str({exact}) {unset}",
        f"    http-request set-var(txn.mci_be) path,map_beg({prefix}) {unset}",
        "    use_backend %[var(txn.mci_be)] if { var(txn.mci_be) -m found }",
        f"    default_backend {DEFAULT_BACKEND}",
        "",
        f"backend {DEFAULT_BACKEND}",
        "    http-request return status 503 content-type text/plain "
        'string "no MultiClusterIngress route for this host and path\\n"',
        "",
        "# Never used for routing: the map only has to exist for the runtime API.",
        "backend mci_bookkeeping",
        f"    http-request set-var(txn.mci_owner) str(),map_str({layout.slots_map})",
        "",
    ]
    for index in range(layout.slots):
        lines += [
            f"backend {layout.slot_name(index)}",
            "    balance roundrobin",
            f"    server-template {SERVER_PREFIX} 1-{layout.servers_per_slot} 0.0.0.0:1 disabled",
            "",
        ]
    return "\n".join(lines)


def _bind(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def write_map_files(layout: HAProxyLayout) -> None:
    """Create the map directory and empty map files (HAProxy 2.6 needs them to start)."""
    pathlib.Path(layout.map_dir).mkdir(parents=True, exist_ok=True)
    for name in layout.map_files:
        path = pathlib.Path(name)
        if not path.exists():
            path.write_text("")
