"""Which HTTP proxy, if any, a connection to an API server goes through.

Users' clusters sit behind proxies given three ways: explicitly for one
server (kubeconfig ``proxy-url``, Karmada's ``Cluster.spec.proxyURL``), or
for the whole process in the environment (``HTTPS_PROXY``/``HTTP_PROXY`` and
``NO_PROXY``).  An explicit proxy always applies.  The environment is read
as Go's ``http.ProxyFromEnvironment`` reads it, so a component and
``kubectl`` on the same machine agree: loopback and ``localhost`` are never
proxied; ``NO_PROXY`` holds host names (matching the name and its
subdomains; a leading dot or ``*.`` matches subdomains only), IP addresses,
CIDR blocks, optional ``:port`` suffixes, or ``*`` for everything.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Mapping

SUPPORTED_SCHEMES = ("http", "https")


class ProxyConfigError(ValueError):
    """A proxy URL that cannot be used."""


def problem(url: str) -> str | None:
    """Why ``url`` cannot be used as a proxy, or ``None`` if it can."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme.startswith("socks"):
        return (f"{url!r}: SOCKS proxies are not supported, only HTTP(S) proxies "
                "that speak CONNECT")
    if parsed.scheme not in SUPPORTED_SCHEMES or not parsed.hostname:
        return f"{url!r} is not an http:// or https:// URL"
    try:
        parsed.port  # noqa: B018 -- raises for a bad port
    except ValueError:
        return f"{url!r} has an invalid port"
    return None


def check_proxy_url(url: str) -> str:
    """``url`` if it can be used as a proxy; :class:`ProxyConfigError` otherwise."""
    found = problem(url)
    if found is not None:
        raise ProxyConfigError(f"proxy {found}")
    return url


def _env(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name.upper()) or environ.get(name.lower()) or ""


def from_environment(server: str, environ: Mapping[str, str]) -> str | None:
    """The proxy the environment names for ``server``, or ``None`` (go direct)."""
    parsed = urllib.parse.urlsplit(server)
    host = (parsed.hostname or "").lower()
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    if host == "localhost" or host.endswith(".localhost"):
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass
    proxy = _env(environ, "https_proxy") if parsed.scheme == "https" else ""
    proxy = proxy or _env(environ, "http_proxy")
    if not proxy:
        return None
    if bypassed(host, port, _env(environ, "no_proxy")):
        return None
    if "://" not in proxy:
        proxy = f"http://{proxy}"  # Go accepts a bare host:port
    return proxy


def bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` exempts ``host:port``."""
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry:
            try:
                network = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                continue
            if address is not None and address in network:
                return True
            continue
        entry_host, entry_port = _split_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        try:
            entry_address = ipaddress.ip_address(entry_host)
        except ValueError:
            entry_address = None
        if entry_address is not None:
            if entry_address == address:
                return True
            continue
        if entry_host.startswith("*."):
            entry_host = entry_host[1:]
        if entry_host.startswith("."):
            if host.endswith(entry_host):
                return True
        elif host == entry_host or host.endswith("." + entry_host):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):  # [v6]:port
        closing = entry.find("]")
        host = entry[1:closing]
        rest = entry[closing + 1:]
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        if port.isdigit():
            return host, int(port)
    return entry, None
