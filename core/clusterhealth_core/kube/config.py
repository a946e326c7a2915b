"""Credentials for one API server: from kubeconfigs, a pod, or a Cluster's Secret.

Everything is read and checked up front -- the CA and the client certificate
are loaded into a TLS context, an ``exec`` plugin's command is looked up --
so a bad kubeconfig is one clear :class:`~clusterhealth_core.kube.errors.ConfigError`
at start-up (naming the kubeconfig, the context and the field) instead of a
TLS failure or a 401 deep inside the first request.

Where the credentials come from (:func:`load_default`, what every component's
``--kubeconfig``/``--context`` flags use):

1. ``--kubeconfig PATH``: that one file (``$KUBECONFIG`` is ignored, as kubectl does);
2. in a pod (``KUBERNETES_SERVICE_HOST`` set) and no ``--context``: the pod's
   service account -- what a Deployment or DaemonSet without flags expects;
3. ``$KUBECONFIG``: its files (``os.pathsep``-separated) merged as kubectl
   merges them -- the first file that names a cluster, user or context wins
   for it, and so does the first ``current-context``; missing files are skipped;
4. ``~/.kube/config``.

client-go's default rules try the files before the service account; we keep
the service account first inside a pod (it was the only default before), so a
stray ``KUBECONFIG`` in a pod's environment changes nothing: pass
``--kubeconfig`` to use a file there.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import ipaddress
import os
import pathlib
import re
import socket
import ssl
import tempfile
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import errors, execplugin, proxies

SERVICE_ACCOUNT_DIR = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")
KUBECONFIG_ENV = "KUBECONFIG"
_TOKEN_REREAD_SECONDS = 60.0
_EXEC_EXTENSION = "client.authentication.k8s.io/exec"
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_AUTH_PROVIDER_HINTS = {
    "gcp": "GKE: install gke-gcloud-auth-plugin and regenerate the kubeconfig "
           "(gcloud container clusters get-credentials), which then uses an exec plugin",
    "azure": "AKS: convert it with 'kubelogin convert-kubeconfig', which writes an exec plugin",
    "oidc": "OIDC: use an exec plugin such as kubelogin (kubectl oidc-login get-token)",
}


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
    exec_plugin: execplugin.ExecPlugin | None = None
    """A credential plugin that issues the bearer token (kubeconfig ``exec``)."""

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
        if self.proxy_url is not None:
            problem = proxies.problem(self.proxy_url)
            if problem:
                raise errors.ConfigError(f"{self.source}: proxy {problem}")
        for name, value in self.proxy_headers:
            if not _HEADER_NAME.match(name) or "\r" in value or "\n" in value:
                raise errors.ConfigError(
                    f"{self.source}: proxy header {name!r} is not a valid HTTP header"
                )
        if self.impersonate_groups and not self.impersonate_user:
            raise errors.ConfigError(
                f"{self.source}: impersonating groups needs a user to impersonate too"
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
        """The TLS settings (``False`` for plain http); a :class:`ConfigError` if unusable."""
        if self.server.startswith("http://"):
            return False
        context: ssl.SSLContext
        if self.tls_server_name:
            context = ServerNameContext(ssl.PROTOCOL_TLS_CLIENT)
            context.server_name = self.tls_server_name
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies name and chain
        if self.insecure_skip_tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.ca_data is not None:
            # Only the given CA, as kubectl: not the system's store on top of it.
            load_ca(context, self.ca_data, f"{self.source}: certificate authority")
        else:
            context.load_default_certs()
        if self.client_cert_data is not None and self.client_key_data is not None:
            _load_cert_chain(context, self.client_cert_data, self.client_key_data,
                             f"{self.source}: client certificate")
        return context


def _checking_context() -> ssl.SSLContext:
    """A bare client context to check that certificates and keys load (not used to connect).

    Not ``ssl.create_default_context()``: that loads the system's CA store as well, about
    20 ms a context here, twice at every start, for nothing.
    """
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class ServerNameContext(ssl.SSLContext):
    """A client context that checks (and sends as SNI) a fixed server name.

    kubeconfig's ``tls-server-name``: the server is addressed one way (an IP,
    a load balancer) and its certificate names it another.  Overriding the
    name here, where every TLS connection is wrapped, covers direct
    connections and tunnels through a proxy alike.
    """

    server_name = ""

    def wrap_bio(self, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO,
                 server_side: bool = False, server_hostname: str | bytes | None = None,
                 session: ssl.SSLSession | None = None) -> ssl.SSLObject:
        """Wrap with :attr:`server_name` instead of the host connected to."""
        return super().wrap_bio(incoming, outgoing, server_side,
                                self.server_name or server_hostname, session)

    def wrap_socket(self, sock: socket.socket, server_side: bool = False,
                    do_handshake_on_connect: bool = True, suppress_ragged_eofs: bool = True,
                    server_hostname: str | bytes | None = None,
                    session: ssl.SSLSession | None = None) -> ssl.SSLSocket:
        """Wrap with :attr:`server_name` instead of the host connected to."""
        return super().wrap_socket(sock, server_side, do_handshake_on_connect,
                                   suppress_ragged_eofs, self.server_name or server_hostname,
                                   session)


def load_ca(context: ssl.SSLContext, ca: bytes, what: str) -> None:
    """Trust the PEM certificates in ``ca``; a :class:`ConfigError` naming ``what`` if not."""
    try:
        text = ca.decode("ascii")
    except UnicodeDecodeError:
        raise errors.ConfigError(f"{what} is not PEM (binary data; DER?)") from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise errors.ConfigError(f"{what} is not a PEM certificate")
    try:
        context.load_verify_locations(cadata=text)
    except ssl.SSLError as exc:
        raise errors.ConfigError(f"{what} cannot be loaded: {exc.reason or exc}") from exc


def _load_cert_chain(context: ssl.SSLContext, cert: bytes, key: bytes, what: str) -> None:
    if b"-----BEGIN CERTIFICATE-----" not in cert:
        raise errors.ConfigError(f"{what}: the certificate is not PEM")
    if b"PRIVATE KEY-----" not in key:
        raise errors.ConfigError(f"{what}: the key is not a PEM private key")
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
            if exc.reason == "KEY_VALUES_MISMATCH":
                raise errors.ConfigError(
                    f"{what}: the certificate and the key do not match"
                ) from exc
            raise errors.ConfigError(f"{what} unusable: {exc.reason or exc}") from exc


class TokenSource:
    """Serves the bearer token: fixed, re-read from a file, or issued by an exec plugin.

    A token file is re-read as kubelet rotates it; an ``exec`` plugin
    (:class:`~clusterhealth_core.kube.execplugin.ExecTokenSource`) is run when
    its token is missing or expiring.  :meth:`token` is a coroutine for the
    plugin's sake; :meth:`invalidate` is called after a 401, and
    :attr:`refreshable` says whether asking again can give a different token.
    """

    def __init__(
        self,
        credentials: Credentials,
        *,
        clock: clocks.Clock | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._credentials = credentials
        self._cached: str | None = credentials.token
        self._read_at = float("-inf")
        self.exec_source: execplugin.ExecTokenSource | None = None
        """The plugin runner, when the credentials have an ``exec`` plugin."""
        if credentials.exec_plugin is not None:
            self.exec_source = execplugin.ExecTokenSource(
                credentials.exec_plugin, clock=clock, environ=environ
            )

    @property
    def refreshable(self) -> bool:
        """Whether a 401 is worth retrying with a fresh token."""
        if self.exec_source is not None:
            return self.exec_source.refreshable
        return self._credentials.token_file is not None

    def invalidate(self, token: str | None = None) -> None:
        """Forget the cached token: the next :meth:`token` reads it (or runs the plugin) again.

        Pass the ``token`` that was refused so that concurrent 401s for the same
        stale token cause one refresh, not one each.
        """
        if self.exec_source is not None:
            self.exec_source.invalidate(token)
            return
        self._read_at = float("-inf")

    async def token(self) -> str | None:
        """The current token, or ``None`` when the credentials have none."""
        if self.exec_source is not None:
            return await self.exec_source.token()
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


# --- kubeconfig files ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Named:
    """A cluster, user or context body and the file it came from (relative paths)."""

    body: Mapping[str, Any]
    file: pathlib.Path


class _Merged:
    """Several kubeconfig files seen as one, as kubectl merges ``KUBECONFIG``."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.files: list[pathlib.Path] = []
        self.clusters: dict[str, _Named] = {}
        self.users: dict[str, _Named] = {}
        self.contexts: dict[str, _Named] = {}
        self.current_context: str | None = None

    def referred(self, kind: str, name: str, where: str) -> _Named:
        """The ``cluster`` or ``user`` a context names; a clear error when no file has it."""
        found = (self.clusters if kind == "cluster" else self.users).get(name)
        if found is None:
            raise errors.ConfigError(f"{where}: no {kind} named {name!r} in {self.label}")
        return found

    def add(self, file: pathlib.Path, document: Mapping[str, Any]) -> None:
        """Merge one file: what earlier files named stays."""
        self.files.append(file)
        for key, what, target in (
            ("clusters", "cluster", self.clusters),
            ("users", "user", self.users),
            ("contexts", "context", self.contexts),
        ):
            items = document.get(key)
            if items is None:
                continue
            if not isinstance(items, list):
                raise errors.ConfigError(f"kubeconfig {file}: {key} must be a list")
            for index, item in enumerate(items):
                if not isinstance(item, Mapping) or not item.get("name"):
                    raise errors.ConfigError(f"kubeconfig {file}: {key}[{index}] has no name")
                body = item.get(what)
                if body is None:
                    body = {}
                if not isinstance(body, Mapping):
                    raise errors.ConfigError(
                        f"kubeconfig {file}: {key}[{index}] ({item['name']}): "
                        f"{what} must be a mapping"
                    )
                target.setdefault(str(item["name"]), _Named(body, file))
        current = document.get("current-context")
        if current and self.current_context is None:
            self.current_context = str(current)


def _read_document(file: pathlib.Path, *, single: bool) -> Mapping[str, Any] | None:
    try:
        text = file.read_text()
    except OSError as exc:
        raise errors.ConfigError(
            f"cannot read kubeconfig {file}: {exc.strerror or exc}"
        ) from exc
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise errors.ConfigError(f"kubeconfig {file} is not valid YAML: {exc}") from exc
    if document is None and not single:
        return None  # an empty file in a KUBECONFIG list adds nothing
    if not isinstance(document, Mapping):
        raise errors.ConfigError(f"kubeconfig {file} is empty or not a mapping")
    return document


def _b64(value: Any, where: str, field: str) -> bytes:
    # Kubeconfigs written by hand or by templates wrap long base64 over lines.
    text = "".join(str(value).split())
    try:
        return base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        raise errors.ConfigError(f"{where}: {field} is not valid base64") from None


def _path(value: Any, base: pathlib.Path) -> pathlib.Path:
    path = pathlib.Path(str(value)).expanduser()
    return path if path.is_absolute() else base / path


def _data_or_file(entry: _Named, key: str, where: str) -> bytes | None:
    data = entry.body.get(f"{key}-data")
    if data:
        return _b64(data, where, f"{key}-data")
    value = entry.body.get(key)
    if value:
        full = _path(value, entry.file.parent)
        try:
            return full.read_bytes()
        except OSError as exc:
            raise errors.ConfigError(
                f"{where}: cannot read {key} {full}: {exc.strerror or exc}"
            ) from exc
    return None



def _string(body: Mapping[str, Any], key: str, where: str) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise errors.ConfigError(f"{where}: {key} must be a string")
    return str(value)


def _strings(body: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = body.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise errors.ConfigError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _boolean(body: Mapping[str, Any], key: str, where: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise errors.ConfigError(f"{where}: {key} must be true or false")
    return value


def _check_user_supported(user: Mapping[str, Any], where: str) -> None:
    provider = user.get("auth-provider")
    if provider:
        name = provider.get("name", "?") if isinstance(provider, Mapping) else "?"
        hint = _AUTH_PROVIDER_HINTS.get(str(name), "use an exec credential plugin instead")
        raise errors.ConfigError(
            f"{where}: auth-provider {name!r} is not supported (client-go removed the "
            f"built-in providers in Kubernetes 1.26): {hint}"
        )
    if user.get("username") or user.get("password"):
        raise errors.ConfigError(
            f"{where}: username/password (basic auth) is not supported: API servers dropped "
            "it in Kubernetes 1.19; use a token, a client certificate or an exec plugin"
        )
    for key in ("as-uid", "as-user-extra"):
        if user.get(key):
            raise errors.ConfigError(
                f"{where}: {key} is not supported (impersonation by user name 'as' and "
                "groups 'as-groups' is)"
            )


def _exec_cluster_info(
    cluster: Mapping[str, Any], server: str, ca: bytes | None
) -> dict[str, Any]:
    """``ExecCredential.spec.cluster``: the cluster as the plugin sees it."""
    info: dict[str, Any] = {"server": server}
    for key in ("tls-server-name", "proxy-url"):
        if cluster.get(key):
            info[key] = str(cluster[key])
    for key in ("insecure-skip-tls-verify", "disable-compression"):
        if cluster.get(key):
            info[key] = True
    if ca is not None:
        info["certificate-authority-data"] = base64.b64encode(ca).decode()
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, Mapping) and extension.get("name") == _EXEC_EXTENSION:
            info["config"] = extension.get("extension")
    return info


def _from_merged(
    merged: _Merged,
    context: str | None,
    *,
    search_path: str | None = None,
) -> Credentials:
    name = context or merged.current_context
    if not name:
        raise errors.ConfigError(f"{merged.label}: no context given and no current-context set")
    ctx_entry = merged.contexts.get(name)
    if ctx_entry is None:
        known = ", ".join(sorted(merged.contexts)) or "none"
        raise errors.ConfigError(
            f"{merged.label}: no context named {name!r} (contexts: {known})"
        )
    ctx = ctx_entry.body
    ctx_where = f"kubeconfig {ctx_entry.file}, context {name!r}"
    cluster_name = _string(ctx, "cluster", ctx_where)
    if not cluster_name:
        raise errors.ConfigError(f"{ctx_where}: names no cluster")
    cluster_entry = merged.referred("cluster", cluster_name, ctx_where)
    cluster = cluster_entry.body
    cluster_where = f"kubeconfig {cluster_entry.file}, context {name!r}, cluster {cluster_name!r}"
    server = _string(cluster, "server", cluster_where)
    if not server:
        raise errors.ConfigError(f"{cluster_where}: no server")
    server = server.rstrip("/")
    parsed = urllib.parse.urlsplit(server)
    if parsed.scheme not in ("https", "http") or not parsed.hostname:
        raise errors.ConfigError(
            f"{cluster_where}: server {server!r} is not an https:// (or http://) URL"
        )
    ca = _data_or_file(cluster_entry, "certificate-authority", cluster_where)
    insecure = _boolean(cluster, "insecure-skip-tls-verify", cluster_where)
    if insecure and ca is not None:
        raise errors.ConfigError(
            f"{cluster_where}: insecure-skip-tls-verify cannot be combined with a "
            "certificate-authority (kubectl refuses it too); remove one"
        )
    if ca is not None:
        load_ca(_checking_context(), ca, f"{cluster_where}: certificate-authority")
    proxy_url = _string(cluster, "proxy-url", cluster_where)
    if proxy_url is not None:
        problem = proxies.problem(proxy_url)
        if problem:
            raise errors.ConfigError(f"{cluster_where}: proxy-url {problem}")

    user_name = _string(ctx, "user", ctx_where)
    user_entry = _Named({}, ctx_entry.file)
    user_where = ctx_where
    if user_name:
        user_entry = merged.referred("user", user_name, ctx_where)
        user_where = f"kubeconfig {user_entry.file}, context {name!r}, user {user_name!r}"
    user = user_entry.body
    _check_user_supported(user, user_where)
    cert = _data_or_file(user_entry, "client-certificate", user_where)
    key = _data_or_file(user_entry, "client-key", user_where)
    if (cert is None) != (key is None):
        missing = "client-key" if key is None else "client-certificate"
        raise errors.ConfigError(
            f"{user_where}: a client certificate needs both client-certificate and "
            f"client-key; {missing} is missing"
        )
    if cert is not None and key is not None:
        _load_cert_chain(_checking_context(), cert, key,
                         f"{user_where}: client-certificate/client-key")
    token = _string(user, "token", user_where)
    token_file: pathlib.Path | None = None
    token_file_value = _string(user, "tokenFile", user_where)
    if token_file_value:
        token_file = _path(token_file_value, user_entry.file.parent)
        try:
            token_file.read_bytes()
        except OSError as exc:
            raise errors.ConfigError(
                f"{user_where}: cannot read tokenFile {token_file}: {exc.strerror or exc}"
            ) from exc
    plugin = None
    exec_entry = user.get("exec")
    if exec_entry:
        if not isinstance(exec_entry, Mapping):
            raise errors.ConfigError(f"{user_where}: exec must be a mapping")
        if token or token_file:
            raise errors.ConfigError(
                f"{user_where}: both a token and an exec plugin; kubectl would silently use "
                "the token: remove one"
            )
        plugin = execplugin.parse(
            exec_entry, user_entry.file.parent, user_where,
            _exec_cluster_info(cluster, server, ca), search_path=search_path,
        )
    impersonate_user = _string(user, "as", user_where)
    impersonate_groups = _strings(user, "as-groups", user_where)
    if impersonate_groups and not impersonate_user:
        raise errors.ConfigError(
            f"{user_where}: as-groups needs as (the user to impersonate) too"
        )
    credentials = Credentials(
        server=server,
        ca_data=ca,
        insecure_skip_tls_verify=insecure,
        client_cert_data=cert,
        client_key_data=key,
        token=token,
        token_file=token_file,
        source=f"{merged.label} (context {name})",
        tls_server_name=_string(cluster, "tls-server-name", cluster_where),
        proxy_url=proxy_url,
        impersonate_user=impersonate_user,
        impersonate_groups=impersonate_groups,
        namespace=_string(ctx, "namespace", ctx_where),
        exec_plugin=plugin,
    )
    credentials.ssl_context()  # everything TLS needs, parsed now
    return credentials


def load_kubeconfig(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    context: str | None = None,
    *,
    search_path: str | None = None,
) -> Credentials:
    """Read a kubeconfig file, or merge several as kubectl does with ``KUBECONFIG``.

    ``context`` defaults to the (first) current-context.  One path must be
    readable; from several, missing files are skipped, as kubectl does.
    ``search_path`` is where an ``exec`` plugin's command is looked up
    (default: ``$PATH``).
    """
    if isinstance(path, str | os.PathLike):
        files = [pathlib.Path(path).expanduser()]
    else:
        files = []
        for item in path:
            file = pathlib.Path(item).expanduser()
            if file not in files:
                files.append(file)
    if not files:
        raise errors.ConfigError("no kubeconfig file given")
    single = len(files) == 1
    label = str(files[0]) if single else os.pathsep.join(str(f) for f in files)
    merged = _Merged(label if single else f"KUBECONFIG {label}")
    for file in files:
        if not single and not file.exists():
            continue
        document = _read_document(file, single=single)
        if document is not None:
            merged.add(file, document)
    if not merged.files:
        raise errors.ConfigError(f"none of the kubeconfig files exist: {label}")
    return _from_merged(merged, context, search_path=search_path)


def kubeconfig_paths(
    environ: Mapping[str, str] | None = None, home: pathlib.Path | None = None
) -> list[pathlib.Path]:
    """The files kubectl reads without ``--kubeconfig``: ``$KUBECONFIG`` or ``~/.kube/config``."""
    environ = os.environ if environ is None else environ
    listed = [p for p in environ.get(KUBECONFIG_ENV, "").split(os.pathsep) if p.strip()]
    if listed:
        return [pathlib.Path(p).expanduser() for p in listed]
    if home is None:
        home = pathlib.Path(environ["HOME"]) if environ.get("HOME") else pathlib.Path.home()
    return [home / ".kube" / "config"]


def load_default(
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    home: pathlib.Path | None = None,
    sa_dir: pathlib.Path = SERVICE_ACCOUNT_DIR,
) -> Credentials:
    """Credentials by the loading rules in this module's docstring.

    ``--kubeconfig``; else, in a pod without ``--context``, the service
    account; else ``$KUBECONFIG`` (merged); else ``~/.kube/config``.
    """
    environ = os.environ if environ is None else environ
    search_path = environ.get("PATH", os.defpath)
    if kubeconfig:
        return load_kubeconfig(kubeconfig, context, search_path=search_path)
    in_pod = bool(environ.get("KUBERNETES_SERVICE_HOST"))
    if in_pod and not context:
        return in_cluster(sa_dir, environ=environ)
    paths = kubeconfig_paths(environ, home)
    if any(p.exists() for p in paths):
        return load_kubeconfig(paths, context, search_path=search_path)
    where = (f"${KUBECONFIG_ENV} ({os.pathsep.join(str(p) for p in paths)}) names no "
             "existing file" if environ.get(KUBECONFIG_ENV, "").strip()
             else f"{paths[0]} does not exist")
    pod = ("" if in_pod else
           "not running in a pod (KUBERNETES_SERVICE_HOST unset), ")
    raise errors.ConfigError(f"no kubeconfig: {pod}{where}; give --kubeconfig")


def in_cluster(
    sa_dir: pathlib.Path = SERVICE_ACCOUNT_DIR, *, environ: Mapping[str, str] | None = None
) -> Credentials:
    """Credentials of the pod's service account (``KUBERNETES_SERVICE_HOST``)."""
    environ = os.environ if environ is None else environ
    host = environ.get("KUBERNETES_SERVICE_HOST")
    port = environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise errors.ConfigError(
            "not running in a pod (KUBERNETES_SERVICE_HOST unset): give a kubeconfig"
        )
    token_file = sa_dir / "token"
    if not token_file.exists():
        raise errors.ConfigError(f"service-account token {token_file} missing")
    ca_file = sa_dir / "ca.crt"
    namespace_file = sa_dir / "namespace"
    namespace = None
    if namespace_file.exists():
        namespace = namespace_file.read_text().strip() or None
    host_part = f"[{host}]" if ":" in host else host
    return Credentials(
        server=f"https://{host_part}:{port}",
        ca_data=ca_file.read_bytes() if ca_file.exists() else None,
        token_file=token_file,
        source="in-cluster service account",
        namespace=namespace,
    )


def from_cluster_secret(
    api_endpoint: str,
    secret: Mapping[str, Any],
    insecure: bool = False,
    *,
    proxy_url: str | None = None,
    proxy_headers: Mapping[str, str] | None = None,
) -> Credentials:
    """Credentials for a member from its Karmada-style Secret (``caBundle``, ``token``).

    ``proxy_url`` and ``proxy_headers`` are the Cluster's ``spec.proxyURL`` and
    ``spec.proxyHeader`` (header name -> value, several values comma-separated).
    """
    data = secret.get("data") or {}
    name = (secret.get("metadata") or {}).get("name", "?")
    try:
        ca = base64.b64decode(data["caBundle"]) if data.get("caBundle") else None
        token = base64.b64decode(data["token"]).decode() if data.get("token") else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.ConfigError(f"cluster secret {name} holds invalid base64") from exc
    if token is None:
        raise errors.ConfigError(f"cluster secret {name} has no 'token'")
    return Credentials(
        server=api_endpoint.rstrip("/"),
        ca_data=ca,
        insecure_skip_tls_verify=insecure,
        token=token,
        source=f"cluster secret {name}",
        proxy_url=proxy_url or None,
        proxy_headers=tuple((str(k), str(v)) for k, v in (proxy_headers or {}).items()),
    )
