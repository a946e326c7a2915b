"""Bearer tokens from ``exec`` credential plugins, as EKS, GKE, AKS and OIDC kubeconfigs use.

A kubeconfig user with an ``exec`` section names a program (``aws eks
get-token``, ``gke-gcloud-auth-plugin``, ``kubelogin``...) that prints an
``ExecCredential`` (``client.authentication.k8s.io/v1`` or ``v1beta1``) on
stdout.  This module does what client-go does with it, minus the terminal
(clusterhealth always runs without one):

* :func:`parse` reads and checks the ``exec`` section when the kubeconfig is
  loaded, and resolves the command (relative to the kubeconfig's directory
  when it contains a slash, else on ``PATH``) without running it, so a
  missing program is a start-up error quoting the ``installHint``;
* :class:`ExecTokenSource` runs the program on first use, on an asyncio
  subprocess bounded by a timeout, at most one run at a time (concurrent
  callers share it), caches the token until its ``expirationTimestamp``
  (minus a small skew) and runs it again after :meth:`~ExecTokenSource.invalidate`
  (the client calls it on a 401).  The plugin's stderr goes to our log; a
  plugin that fails, times out or prints something that is not a valid
  ``ExecCredential`` raises :class:`ExecPluginError` with the tail of its stderr.

Client certificates issued by a plugin (``status.clientCertificateData``)
are not supported: the client's TLS context is built once from the
kubeconfig, so only tokens can change at run time.  A plugin answering with
a certificate alone gets a clear error saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import json
import logging
import os
import pathlib
import shutil
import signal
import subprocess
from collections.abc import Mapping
from typing import Any

from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import errors

log = logging.getLogger(__name__)

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
API_VERSIONS = (V1, V1BETA1)
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
DEFAULT_TIMEOUT = 60.0
"""How long one run of a plugin may take (a browser login never finishes without a user)."""
MAX_SKEW = 10.0
"""A token is renewed this long before its ``expirationTimestamp`` (at most 10 % of its life)."""
_STDERR_TAIL_LINES = 10
_STDERR_TAIL_CHARS = 2000


class ExecPluginError(errors.ConfigError):
    """An ``exec`` credential plugin is missing, failed, or answered something unusable."""


@dataclasses.dataclass(frozen=True)
class ExecPlugin:
    """One kubeconfig user's ``exec`` section, checked and with its command resolved."""

    command: str
    """The command as the kubeconfig writes it (for messages)."""
    path: str
    """The executable found when the kubeconfig was loaded."""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    """Variables set for the plugin on top of this process's environment."""
    api_version: str = V1
    interactive_mode: str = "Never"
    install_hint: str = ""
    provide_cluster_info: bool = False
    cluster_info: str | None = None
    """``spec.cluster`` of ``KUBERNETES_EXEC_INFO`` as JSON (with ``provideClusterInfo``)."""
    timeout: float = DEFAULT_TIMEOUT
    where: str = "exec plugin"
    """Which kubeconfig, context and user this came from (prefix of every message)."""

    def exec_info(self) -> str:
        """The ``KUBERNETES_EXEC_INFO`` the plugin gets: never interactive."""
        spec: dict[str, Any] = {"interactive": False}
        if self.provide_cluster_info and self.cluster_info is not None:
            spec["cluster"] = json.loads(self.cluster_info)
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential",
                           "spec": spec})


def _hint(install_hint: str) -> str:
    return f"\n{install_hint.strip()}" if install_hint.strip() else ""


def resolve_command(
    command: str, base: pathlib.Path, where: str, install_hint: str = "",
    search_path: str | None = None,
) -> str:
    """The executable ``command`` names, as client-go finds it; never runs it.

    A command with a slash is a path (relative ones against the kubeconfig's
    directory ``base``); anything else is looked up on ``search_path``
    (default: this process's ``PATH``).
    """
    if "/" in command:
        candidate = pathlib.Path(command).expanduser()
        if not candidate.is_absolute():
            candidate = base / candidate
        if not candidate.is_file():
            raise ExecPluginError(
                f"{where}: command {command!r} not found ({candidate} does not exist)"
                f"{_hint(install_hint)}"
            )
        if not os.access(candidate, os.X_OK):
            raise ExecPluginError(f"{where}: command {candidate} is not executable")
        return str(candidate)
    path = search_path if search_path is not None else os.environ.get("PATH", os.defpath)
    found = shutil.which(command, path=path)
    if found is None:
        raise ExecPluginError(
            f"{where}: command {command!r} not found on PATH{_hint(install_hint)}"
        )
    return found


def parse(
    entry: Mapping[str, Any],
    base: pathlib.Path,
    where: str,
    cluster_info: Mapping[str, Any] | None = None,
    *,
    search_path: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> ExecPlugin:
    """Check a kubeconfig user's ``exec`` section and resolve its command.

    ``where`` names the kubeconfig, context and user in every message;
    ``cluster_info`` is the cluster as ``ExecCredential.spec.cluster`` shows it.
    """
    where = f"{where}: exec"
    api_version = entry.get("apiVersion")
    if not api_version:
        raise ExecPluginError(f"{where}: apiVersion is required ({' or '.join(API_VERSIONS)})")
    if api_version not in API_VERSIONS:
        raise ExecPluginError(
            f"{where}: apiVersion {api_version!r} is not supported; use "
            f"{' or '.join(API_VERSIONS)} (v1alpha1 was removed in Kubernetes 1.24)"
        )
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ExecPluginError(f"{where}: command is required")
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
        raise ExecPluginError(f"{where}: args must be a list of strings")
    env: list[tuple[str, str]] = []
    for item in entry.get("env") or []:
        if not isinstance(item, Mapping) or not item.get("name"):
            raise ExecPluginError(f"{where}: env entries need a name (and a value): {item!r}")
        value = item.get("value")
        env.append((str(item["name"]), "" if value is None else str(value)))
    mode = entry.get("interactiveMode")
    if not mode:
        if api_version == V1:
            raise ExecPluginError(
                f"{where}: interactiveMode is required with {V1} (kubectl refuses it too); "
                "set interactiveMode: Never"
            )
        mode = "IfAvailable"  # v1beta1's default
    if mode not in INTERACTIVE_MODES:
        raise ExecPluginError(
            f"{where}: invalid interactiveMode {mode!r} (Never, IfAvailable or Always)"
        )
    if mode == "Always":
        raise ExecPluginError(
            f"{where}: interactiveMode Always needs a terminal, and clusterhealth runs without "
            "one; use a plugin configuration that works non-interactively "
            "(interactiveMode: Never)"
        )
    provide = entry.get("provideClusterInfo", False)
    if not isinstance(provide, bool):
        raise ExecPluginError(f"{where}: provideClusterInfo must be true or false")
    install_hint = str(entry.get("installHint") or "")
    path = resolve_command(command, base, where, install_hint, search_path)
    return ExecPlugin(
        command=command,
        path=path,
        args=tuple(str(a) for a in args),
        env=tuple(env),
        api_version=str(api_version),
        interactive_mode=str(mode),
        install_hint=install_hint,
        provide_cluster_info=provide,
        cluster_info=json.dumps(dict(cluster_info)) if provide and cluster_info else None,
        timeout=timeout,
        where=where,
    )


@dataclasses.dataclass(frozen=True)
class _Issued:
    token: str
    expires: datetime.datetime | None
    refresh_at: datetime.datetime | None


def _tail(stderr: bytes) -> str:
    lines = stderr.decode(errors="replace").strip().splitlines()[-_STDERR_TAIL_LINES:]
    text = "\n".join(lines)[-_STDERR_TAIL_CHARS:]
    return f"; its stderr ends with:\n{text}" if text else " (nothing on stderr)"


def _timestamp(value: Any, where: str) -> datetime.datetime:
    try:
        moment = datetime.datetime.fromisoformat(str(value))
    except ValueError:
        raise ExecPluginError(
            f"{where}: status.expirationTimestamp {value!r} is not an RFC 3339 time"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment


def read_credential(
    stdout: bytes, plugin: ExecPlugin, now: datetime.datetime
) -> tuple[str, datetime.datetime | None]:
    """Check a plugin's stdout and return its token and expiry time."""
    where = f"{plugin.where}: {plugin.command}"
    try:
        document = json.loads(stdout)
    except ValueError as exc:
        raise ExecPluginError(
            f"{where} printed something that is not an ExecCredential in JSON "
            f"({len(stdout)} bytes: {exc})"
        ) from None
    if not isinstance(document, Mapping) or document.get("kind") != "ExecCredential":
        raise ExecPluginError(f"{where} printed JSON that is not an ExecCredential")
    if document.get("apiVersion") != plugin.api_version:
        raise ExecPluginError(
            f"{where} answered apiVersion {document.get('apiVersion')!r}, but the kubeconfig "
            f"asks for {plugin.api_version!r}"
        )
    status = document.get("status")
    if not isinstance(status, Mapping):
        raise ExecPluginError(f"{where} returned no status")
    token = status.get("token")
    if not token or not isinstance(token, str):
        if status.get("clientCertificateData") or status.get("clientKeyData"):
            raise ExecPluginError(
                f"{where} returned a client certificate instead of a token: client "
                "certificates from exec plugins are not supported by clusterhealth (the TLS "
                "context is built once); configure the plugin to issue a token, or put the "
                "certificate in the kubeconfig (client-certificate-data/client-key-data)"
            )
        raise ExecPluginError(f"{where} returned no status.token")
    if status.get("clientCertificateData"):
        log.warning("%s returned a client certificate as well as a token; using the token only",
                    where)
    expires = None
    if status.get("expirationTimestamp"):
        expires = _timestamp(status["expirationTimestamp"], where)
        if expires <= now:
            log.warning("%s returned a token that expired at %s", where, expires.isoformat())
    return token, expires


class ExecTokenSource:
    """Runs one plugin when a token is needed; shares and caches what it issues."""

    def __init__(
        self,
        plugin: ExecPlugin,
        *,
        clock: clocks.Clock | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.plugin = plugin
        self._clock = clock or clocks.Clock()
        self._environ = environ
        self._issued: _Issued | None = None
        self._running: asyncio.Task[str] | None = None
        self.runs = 0
        """How many times the plugin was started (for tests and debugging)."""

    @property
    def refreshable(self) -> bool:
        """Always: running the plugin again may issue a different token."""
        return True

    def invalidate(self, token: str | None = None) -> None:
        """Forget the cached token (after a 401): the next :meth:`token` runs the plugin.

        With ``token``, only if that is still the cached one: a burst of 401s for
        one stale token then costs one run, not one per failed request.
        """
        if token is not None and self._issued is not None and self._issued.token != token:
            return
        self._issued = None

    def _fresh(self) -> str | None:
        issued = self._issued
        if issued is None:
            return None
        if issued.refresh_at is not None and self._clock.now() >= issued.refresh_at:
            return None
        return issued.token

    async def token(self) -> str:
        """A valid token: the cached one, or one from a (shared) run of the plugin."""
        cached = self._fresh()
        if cached is not None:
            return cached
        task = self._running
        if task is None:
            task = asyncio.get_running_loop().create_task(self._run())
            self._running = task
            task.add_done_callback(self._finished)
        # A caller that is cancelled leaves the run going for the others.
        return await asyncio.shield(task)

    def _finished(self, task: asyncio.Task[str]) -> None:
        if self._running is task:
            self._running = None
        if not task.cancelled():
            task.exception()  # retrieved: the callers got it

    def _env(self) -> dict[str, str]:
        env = dict(os.environ if self._environ is None else self._environ)
        env.update(self.plugin.env)
        env["KUBERNETES_EXEC_INFO"] = self.plugin.exec_info()
        return env

    async def _run(self) -> str:
        plugin = self.plugin
        where = f"{plugin.where}: {plugin.command}"
        self.runs += 1
        try:
            process = await asyncio.create_subprocess_exec(
                plugin.path, *plugin.args,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=self._env(), start_new_session=True,
            )
        except OSError as exc:
            raise ExecPluginError(
                f"{where}: cannot run {plugin.path}: {exc.strerror or exc}"
                f"{_hint(plugin.install_hint)}"
            ) from exc
        try:
            async with asyncio.timeout(plugin.timeout):
                stdout, stderr = await process.communicate()
        except TimeoutError:
            _kill(process)
            await process.wait()
            raise ExecPluginError(
                f"{where} did not finish within {plugin.timeout:g}s (does it wait for a "
                "login in a browser or on a terminal?)"
            ) from None
        except BaseException:
            _kill(process)
            raise
        for line in stderr.decode(errors="replace").splitlines():
            if line.strip():
                log.info("%s: %s", where, line)
        if process.returncode != 0:
            raise ExecPluginError(f"{where} exited with code {process.returncode}{_tail(stderr)}")
        now = self._clock.now()
        try:
            token, expires = read_credential(stdout, plugin, now)
        except ExecPluginError as exc:
            raise ExecPluginError(f"{exc}{_tail(stderr) if stderr.strip() else ''}") from None
        refresh_at = None
        if expires is not None:
            skew = min(MAX_SKEW, max(0.0, (expires - now).total_seconds()) / 10)
            refresh_at = expires - datetime.timedelta(seconds=skew)
        self._issued = _Issued(token, expires, refresh_at)
        log.debug("%s issued a token (expires %s)", where,
                  expires.isoformat() if expires else "never")
        return token


def _kill(process: asyncio.subprocess.Process) -> None:
    # The plugin leads its own session: its children (a helper it spawned) go too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
