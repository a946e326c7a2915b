"""Credentials for one API server: from a kubeconfig, a pod, or a Cluster's Secret.

Everything is read and checked up front, so a bad kubeconfig is one clear
:class:`~clusterhealth_core.kube.errors.ConfigError` at start-up instead of a
TLS failure deep inside the first request.
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import os
import pathlib
import ssl
import tempfile
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

import yaml

from clusterhealth_core.kube import errors

SERVICE_ACCOUNT_DIR = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")
_TOKEN_REREAD_SECONDS = 60.0


@dataclasses.dataclass(frozen=True)
class Credentials:
    """Where an API server is and how to authenticate to it."""

    server: str
    ca_data: bytes | None = None
    insecure_skip_tls_verify: bool = False
    client_cert_data: bytes | None = None
    client_key_data: bytes | None = None
    token: str | None = None
    token_file: pathlib.Path | None = None
    source: str = "<memory>"
    tls_server_name: str | None = None
    """Host name the server's certificate is checked against (and sent as SNI)."""
    proxy_url: str | None = None
    """An explicit HTTP(S) proxy (kubeconfig ``proxy-url``, ``Cluster.spec.proxyURL``).

    ``None`` means: take it from the environment (``HTTPS_PROXY``/``NO_PROXY``)."""
    proxy_headers: tuple[tuple[str, str], ...] = ()
    """Headers sent to the proxy with ``CONNECT`` (``Cluster.spec.proxyHeader``)."""
    impersonate_user: str | None = None
    impersonate_groups: tuple[str, ...] = ()
    namespace: str | None = None
    """The kubeconfig context's namespace (informational; clients name namespaces)."""

    def __post_init__(self) -> None:
        parsed = urllib.parse.urlsplit(self.server)
        if parsed.scheme not in ("https", "http") or not parsed.hostname:
            raise errors.ConfigError(
                f"{self.source}: server {self.server!r} is not an http(s) URL"
            )
        if (self.client_cert_data is None) != (self.client_key_data is None):
            raise errors.ConfigError(
                f"{self.source}: a client certificate needs both the certificate and the key"
            )

    @property
    def host(self) -> str:
        """The server's host name or IP address."""
        return urllib.parse.urlsplit(self.server).hostname or ""

    def host_is_ip(self) -> bool:
        """Whether the server is addressed by IP (no DNS lookup to reach it)."""
        try:
            ipaddress.ip_address(self.host)
        except ValueError:
            return False
        return True

    def ssl_context(self) -> ssl.SSLContext | bool:
        """The TLS settings for aiohttp (``False`` for plain http)."""
        if self.server.startswith("http://"):
            return False
        if self.insecure_skip_tls_verify:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.ca_data is not None:
            context = ssl.create_default_context(cadata=self.ca_data.decode())
        else:
            context = ssl.create_default_context()
        if self.client_cert_data is not None and self.client_key_data is not None:
            _load_cert_chain(context, self.client_cert_data, self.client_key_data)
        return context


def _load_cert_chain(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl only loads certificates from files; keep them for the shortest time.
    with tempfile.TemporaryDirectory(prefix="clusterhealth-tls-") as tmp:
        cert_path = pathlib.Path(tmp) / "tls.crt"
        key_path = pathlib.Path(tmp) / "tls.key"
        cert_path.write_bytes(cert)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key)
        try:
            context.load_cert_chain(str(cert_path), str(key_path))
        except ssl.SSLError as exc:
            raise errors.ConfigError(f"client certificate/key unusable: {exc}") from exc


class TokenSource:
    """Serves the bearer token, re-reading a token file as kubelet rotates it.

    :meth:`token` is a coroutine so that sources which must run something to
    get a token (an ``exec`` credential plugin) fit the same interface;
    :meth:`invalidate` is called after a 401, and :attr:`refreshable` says
    whether asking again can give a different token.
    """

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials
        self._cached: str | None = credentials.token
        self._read_at = float("-inf")

    @property
    def refreshable(self) -> bool:
        """Whether a 401 is worth retrying with a fresh token."""
        return self._credentials.token_file is not None

    def invalidate(self) -> None:
        """Forget the cached token: the next :meth:`token` reads it again."""
        self._read_at = float("-inf")

    async def token(self) -> str | None:
        """The current token, or ``None`` when the credentials have none."""
        path = self._credentials.token_file
        if path is None:
            return self._cached
        now = time.monotonic()
        if now - self._read_at >= _TOKEN_REREAD_SECONDS:
            try:
                self._cached = path.read_text().strip()
            except OSError as exc:
                if self._cached is None:
                    raise errors.ConfigError(f"token file {path} unreadable: {exc}") from exc
            self._read_at = now
        return self._cached


def _data_or_file(
    entry: Mapping[str, Any], key: str, base: pathlib.Path, source: str
) -> bytes | None:
    data = entry.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except ValueError as exc:
            raise errors.ConfigError(f"{source}: {key}-data is not valid base64") from exc
    path = entry.get(key)
    if path:
        full = (base / str(path)).expanduser()
        try:
            return full.read_bytes()
        except OSError as exc:
            raise errors.ConfigError(f"{source}: cannot read {key} {full}: {exc}") from exc
    return None


def _named(items: Any, name: str, what: str, source: str) -> Mapping[str, Any]:
    for item in items or []:
        if isinstance(item, Mapping) and item.get("name") == name:
            body = item.get(what)
            if isinstance(body, Mapping):
                return body
    raise errors.ConfigError(f"{source}: no {what} named {name!r}")


def load_kubeconfig(path: str | os.PathLike[str], context: str | None = None) -> Credentials:
    """Read a kubeconfig file; ``context`` defaults to its current-context."""
    file = pathlib.Path(path).expanduser()
    source = str(file)
    try:
        document = yaml.safe_load(file.read_text())
    except OSError as exc:
        raise errors.ConfigError(f"cannot read kubeconfig {file}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise errors.ConfigError(f"kubeconfig {file} is not valid YAML: {exc}") from exc
    if not isinstance(document, Mapping):
        raise errors.ConfigError(f"kubeconfig {file} is empty or not a mapping")
    context_name = context or document.get("current-context")
    if not context_name:
        raise errors.ConfigError(f"{source}: no context given and no current-context set")
    ctx = _named(document.get("contexts"), str(context_name), "context", source)
    cluster = _named(document.get("clusters"), str(ctx.get("cluster", "")), "cluster", source)
    user: Mapping[str, Any] = {}
    if ctx.get("user"):
        user = _named(document.get("users"), str(ctx["user"]), "user", source)
    base = file.parent
    server = cluster.get("server")
    if not server:
        raise errors.ConfigError(f"{source}: cluster of context {context_name!r} has no server")
    token_file = user.get("tokenFile")
    return Credentials(
        server=str(server).rstrip("/"),
        ca_data=_data_or_file(cluster, "certificate-authority", base, source),
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify", False)),
        client_cert_data=_data_or_file(user, "client-certificate", base, source),
        client_key_data=_data_or_file(user, "client-key", base, source),
        token=str(user["token"]) if user.get("token") else None,
        token_file=(base / str(token_file)) if token_file else None,
        source=f"{source} (context {context_name})",
    )


def in_cluster(sa_dir: pathlib.Path = SERVICE_ACCOUNT_DIR) -> Credentials:
    """Credentials of the pod's service account (``KUBERNETES_SERVICE_HOST``)."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise errors.ConfigError(
            "not running in a pod (KUBERNETES_SERVICE_HOST unset): give a kubeconfig"
        )
    token_file = sa_dir / "token"
    if not token_file.exists():
        raise errors.ConfigError(f"service-account token {token_file} missing")
    ca_file = sa_dir / "ca.crt"
    host_part = f"[{host}]" if ":" in host else host
    return Credentials(
        server=f"https://{host_part}:{port}",
        ca_data=ca_file.read_bytes() if ca_file.exists() else None,
        token_file=token_file,
        source="in-cluster service account",
    )


def from_cluster_secret(
    api_endpoint: str, secret: Mapping[str, Any], insecure: bool = False
) -> Credentials:
    """Credentials for a member from its Karmada-style Secret (``caBundle``, ``token``)."""
    data = secret.get("data") or {}
    try:
        ca = base64.b64decode(data["caBundle"]) if data.get("caBundle") else None
        token = base64.b64decode(data["token"]).decode() if data.get("token") else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.ConfigError("cluster secret holds invalid base64") from exc
    if token is None:
        raise errors.ConfigError("cluster secret has no 'token'")
    name = (secret.get("metadata") or {}).get("name", "?")
    return Credentials(
        server=api_endpoint.rstrip("/"),
        ca_data=ca,
        insecure_skip_tls_verify=insecure,
        token=token,
        source=f"cluster secret {name}",
    )
