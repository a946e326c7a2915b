"""Karmada's own control-plane parts, for the environment's Karmada mode.

``EnvironmentConfig(control_plane="karmada")`` makes the environment's control
plane a Karmada API, built from Karmada's own parts as its installers set them
up, so that the add-ons are tested against what they meet in production:

- the control-plane ``kube-apiserver`` plays ``karmada-apiserver``: it gets the
  aggregation (front-proxy) flags (:class:`FrontProxy`) and Karmada's own CRDs
  (Remedy without a status subresource, MultiClusterIngress, the bindings and
  policies its controller-manager watches) instead of ours;
- ``karmada-aggregated-apiserver`` serves ``clusters.cluster.karmada.io`` on an
  address of its own, on the same etcd, registered as the APIService
  ``v1alpha1.cluster.karmada.io`` through an ExternalName Service and a
  ``caBundle`` (the aggregator proxies to the Service's ``externalName``; an IP
  literal needs no DNS);
- ``karmada-controller-manager`` runs its ``cluster`` and ``clusterStatus``
  controllers (by default), so Karmada itself writes ``Ready`` and
  ``CompleteAPIEnablements`` on the member Clusters.

The binaries and CRD manifests come from :func:`binaries.ensure_karmada`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import functools
import logging
import pathlib
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import yaml

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import binaries as bins
from clusterhealth_localenv import pki, processes

log = logging.getLogger(__name__)

KARMADA_SYSTEM = "karmada-system"
"""The namespace of Karmada's own objects (the aggregated apiserver's Service)."""
AGGREGATED_SERVICE = "karmada-aggregated-apiserver"
API_SERVICE = "v1alpha1.cluster.karmada.io"
AGGREGATED_HOST = "127.0.2.1"
"""The aggregated apiserver's address, and the ExternalName the aggregator dials."""
FRONT_PROXY_CLIENT = "front-proxy-client"
"""Common name of the kube-apiserver's proxy client certificate (the allowed name)."""

APISERVICES = resources.Resource(
    "apiregistration.k8s.io", "v1", "apiservices", "APIService", namespaced=False
)

CRD_FILES: tuple[str, ...] = (
    "remedy.karmada.io_remedies.yaml",
    "networking.karmada.io_multiclusteringresses.yaml",
    # karmada-controller-manager's cluster controller indexes (Cluster)ResourceBindings
    # and cleans Works up; the MCI provider reads ResourceBindings where they are served.
    "work.karmada.io_resourcebindings.yaml",
    "work.karmada.io_clusterresourcebindings.yaml",
    "work.karmada.io_works.yaml",
    # Its resource detector (always on) watches the propagation policies, and its
    # resource interpreter the interpreter customizations.
    "policy.karmada.io_propagationpolicies.yaml",
    "policy.karmada.io_clusterpropagationpolicies.yaml",
    # Not watched by the controllers it runs: there for tests to compare schemas.
    "policy.karmada.io_clustertaintpolicies.yaml",
    "config.karmada.io_resourceinterpretercustomizations.yaml",
    "config.karmada.io_resourceinterpreterwebhookconfigurations.yaml",
)
"""Karmada's CRDs the Karmada mode installs: ours for Cluster, Remedy and MCI do not apply."""


@dataclasses.dataclass(frozen=True)
class KarmadaSettings:
    """How Karmada's parts run (durations in seconds).

    The status timings are shorter than Karmada's defaults (10 s / 30 s / 30 s)
    so that tests see a member's Ready flip within seconds; the mechanism is
    Karmada's own.
    """

    version: str = bins.KARMADA_VERSION
    controllers: tuple[str, ...] = ("cluster", "clusterStatus")
    """``karmada-controller-manager --controllers`` (Karmada's names, e.g. ``remedy``)."""
    status_update_frequency: float = 2.0
    """``--cluster-status-update-frequency``."""
    failure_threshold: float = 6.0
    """``--cluster-failure-threshold``: failing this long before Ready turns False."""
    success_threshold: float = 4.0
    """``--cluster-success-threshold``: healthy this long before Ready turns True again."""
    extra_controller_manager_args: tuple[str, ...] = ()
    wait_members_ready: bool = True
    """Whether start-up waits until Karmada reports every member Ready=True."""


@dataclasses.dataclass(frozen=True)
class FrontProxy:
    """The front-proxy CA and the kube-apiserver's proxy client certificate."""

    ca_file: pathlib.Path
    client_cert: pathlib.Path
    client_key: pathlib.Path

    @classmethod
    def create(cls, directory: pathlib.Path) -> FrontProxy:
        """A fresh front-proxy CA and client certificate, written to ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        ca = pki.CertificateAuthority("clusterhealth-front-proxy-ca")
        ca_file = directory / "front-proxy-ca.crt"
        ca_file.write_bytes(ca.cert_pem)
        cert, key = ca.client(FRONT_PROXY_CLIENT).write(directory, "front-proxy-client")
        return cls(ca_file, cert, key)

    def apiserver_flags(self) -> list[str]:
        """The aggregation flags ``karmada-apiserver`` runs with."""
        return [
            f"--requestheader-client-ca-file={self.ca_file}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User",
            f"--proxy-client-cert-file={self.client_cert}",
            f"--proxy-client-key-file={self.client_key}",
        ]


def load_crds(binaries: bins.KarmadaBinaries,
              files: Sequence[str] = CRD_FILES) -> list[dict[str, Any]]:
    """Karmada's CRD documents from the build's manifests, in ``files`` order."""
    crds: list[dict[str, Any]] = []
    for name in files:
        with binaries.crd(name).open(encoding="utf-8") as stream:
            crds += [doc for doc in yaml.safe_load_all(stream)
                     if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"]
    return crds


def aggregation_objects(host: str, port: int, ca_pem: bytes) -> tuple[dict[str, Any],
                                                                       dict[str, Any]]:
    """The ExternalName Service and the APIService, as Karmada's installers write them."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": AGGREGATED_SERVICE, "namespace": KARMADA_SYSTEM,
                     "labels": {"app": AGGREGATED_SERVICE, "apiserver": "true"}},
        "spec": {"type": "ExternalName", "externalName": host},
    }
    api_service = {
        "apiVersion": APISERVICES.api_version,
        "kind": "APIService",
        "metadata": {"name": API_SERVICE,
                     "labels": {"app": AGGREGATED_SERVICE, "apiserver": "true"}},
        "spec": {
            "group": "cluster.karmada.io",
            "version": "v1alpha1",
            "service": {"namespace": KARMADA_SYSTEM, "name": AGGREGATED_SERVICE, "port": port},
            "caBundle": base64.b64encode(ca_pem).decode(),
            "groupPriorityMinimum": 2000,
            "versionPriority": 10,
        },
    }
    return service, api_service


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The condition of type ``kind`` in ``obj.status.conditions``, if any."""
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return dict(item)
    return None


class KarmadaControlPlane:
    """``karmada-aggregated-apiserver`` and ``karmada-controller-manager`` of one environment."""

    def __init__(
        self,
        binaries: bins.KarmadaBinaries,
        settings: KarmadaSettings,
        directory: pathlib.Path,
        logs: pathlib.Path,
        ca: pki.CertificateAuthority,
        kubeconfig: pathlib.Path,
        etcd_url: str,
        etcd_prefix: str,
        timeout: float,
    ) -> None:
        self.binaries = binaries
        self.settings = settings
        self.directory = directory
        self.ca = ca
        self.kubeconfig = kubeconfig
        self.timeout = timeout
        directory.mkdir(parents=True, exist_ok=True)
        self.host = AGGREGATED_HOST
        self.port = processes.free_port(self.host)
        self.aggregated = processes.ManagedProcess(
            "karmada-aggregated-apiserver",
            self._aggregated_argv(etcd_url, etcd_prefix),
            logs / "karmada-aggregated-apiserver.log",
        )
        self.metrics_port = processes.free_port("127.0.0.1")
        self.health_port = processes.free_port("127.0.0.1")
        self.controllers: tuple[str, ...] = tuple(settings.controllers)
        """The controllers ``karmada-controller-manager`` runs (now, or at its next start)."""
        self.controller_manager = processes.ManagedProcess(
            "karmada-controller-manager", self._controller_manager_argv(),
            logs / "karmada-controller-manager.log",
        )

    @property
    def url(self) -> str:
        """``https://<ip>:<port>`` of the aggregated apiserver (reached directly)."""
        return f"https://{self.host}:{self.port}"

    def _aggregated_argv(self, etcd_url: str, etcd_prefix: str) -> list[str]:
        service_dns = f"{AGGREGATED_SERVICE}.{KARMADA_SYSTEM}.svc"
        # The aggregator checks the serving certificate against <service>.<namespace>.svc.
        serving = self.ca.serving(AGGREGATED_SERVICE, [self.host],
                                  [service_dns, f"{service_dns}.cluster.local", "localhost"])
        cert, key = serving.write(self.directory, "aggregated-serving")
        kubeconfig = str(self.kubeconfig)
        return [
            str(self.binaries.aggregated_apiserver),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--etcd-servers={etcd_url}",
            f"--etcd-prefix={etcd_prefix}",
            f"--bind-address={self.host}",
            f"--secure-port={self.port}",
            f"--tls-cert-file={cert}",
            f"--tls-private-key-file={key}",
            f"--cert-dir={self.directory / 'certs'}",
            "--tls-min-version=VersionTLS13",
        ]

    def _controller_manager_argv(self) -> list[str]:
        settings = self.settings
        return [
            str(self.binaries.controller_manager),
            f"--kubeconfig={self.kubeconfig}",
            f"--controllers={','.join(self.controllers)}",
            "--leader-elect=false",
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
            f"--cluster-status-update-frequency={_duration(settings.status_update_frequency)}",
            f"--cluster-failure-threshold={_duration(settings.failure_threshold)}",
            f"--cluster-success-threshold={_duration(settings.success_threshold)}",
            *settings.extra_controller_manager_args,
        ]

    # --- lifecycle -------------------------------------------------------

    def start_aggregated_apiserver(self) -> None:
        """Start ``karmada-aggregated-apiserver`` (it needs the control plane up)."""
        self.aggregated.start()

    async def wait_aggregated_apiserver(self, context: ssl.SSLContext) -> None:
        """Wait until the aggregated apiserver answers ``/readyz`` on its own address."""
        await processes.wait_answering(self.aggregated, f"{self.url}/readyz", context,
                                       self.timeout)

    async def register(self, api: kube.ApiClient) -> None:
        """Register the APIService; wait until it is Available and Clusters are served."""
        service, api_service = aggregation_objects(self.host, self.port, self.ca.cert_pem)
        with contextlib.suppress(errors.Conflict):
            await api.create(resources.NAMESPACES, {"metadata": {"name": KARMADA_SYSTEM}})
        with contextlib.suppress(errors.Conflict):
            await api.create(resources.SERVICES, service)
        with contextlib.suppress(errors.Conflict):
            await api.create(APISERVICES, api_service)
        await self._wait(functools.partial(_api_service_available, api),
                         f"APIService {API_SERVICE} Available", self.aggregated)
        await self._wait(functools.partial(_clusters_served, api),
                         "clusters.cluster.karmada.io served", self.aggregated)

    async def start_controller_manager(self, controllers: Sequence[str] | None = None) -> None:
        """Start ``karmada-controller-manager`` (again, after a stop); wait for its probe.

        ``controllers`` replaces its ``--controllers`` from now on (e.g. with
        Karmada's ``remedy`` controller added); it must be stopped to change them.
        """
        if controllers is not None:
            if self.controller_manager.running():
                raise RuntimeError("stop karmada-controller-manager before changing controllers")
            self.controllers = tuple(controllers)
            self.controller_manager.argv = self._controller_manager_argv()
        self.controller_manager.start()
        await processes.wait_answering(
            self.controller_manager, f"http://127.0.0.1:{self.health_port}/healthz", None,
            self.timeout,
        )

    async def wait_members_ready(self, api: kube.ApiClient, members: Sequence[str]) -> None:
        """Wait until Karmada has written ``Ready=True`` on every member Cluster."""
        for name in members:
            await self._wait(functools.partial(_ready, api, name),
                             f"Karmada's Ready=True on Cluster {name}", self.controller_manager)

    async def stop_controller_manager(self) -> None:
        """Stop ``karmada-controller-manager`` (SIGTERM, then SIGKILL)."""
        await self.controller_manager.stop()

    async def stop(self) -> None:
        """Stop both processes, the controller-manager first."""
        await self.controller_manager.stop()
        await self.aggregated.stop()

    def pids(self) -> dict[str, int]:
        """The running processes' pids, by name."""
        return {process.name: process.pid for process in (self.aggregated,
                                                          self.controller_manager)
                if process.pid is not None and process.running()}

    # --- internals -------------------------------------------------------

    async def _wait(self, check: Callable[[], Awaitable[tuple[bool, str]]], what: str,
                    process: processes.ManagedProcess) -> None:
        deadline = time.monotonic() + self.timeout
        last = ""
        while time.monotonic() < deadline:
            if not process.running():
                raise processes.StartError(
                    f"{process.name} exited ({process.exit_code()}) while waiting for "
                    f"{what}:\n{process.log_tail()}"
                )
            try:
                done, last = await check()
            except errors.KubeError as exc:
                done, last = False, str(exc)
            if done:
                return
            await asyncio.sleep(0.2)
        raise processes.StartError(
            f"{what}: not reached after {self.timeout}s (last: {last}); "
            f"{process.name} log:\n{process.log_tail()}"
        )


async def _api_service_available(api: kube.ApiClient) -> tuple[bool, str]:
    obj = await api.get(APISERVICES, API_SERVICE)
    available = condition(obj, "Available") or {}
    return available.get("status") == "True", str(available.get("message", "no condition"))


async def _clusters_served(api: kube.ApiClient) -> tuple[bool, str]:
    discovery = await api.request("GET", "/apis/cluster.karmada.io/v1alpha1")
    names = [r.get("name") for r in discovery.get("resources") or []]
    if "clusters" not in names:
        return False, f"discovery lists {names}"
    await api.list(resources.CLUSTERS)
    return True, ""


async def _ready(api: kube.ApiClient, name: str) -> tuple[bool, str]:
    ready = condition(await api.get(resources.CLUSTERS, name), "Ready")
    if ready is None:
        return False, "no Ready condition"
    return ready.get("status") == "True", f"Ready={ready.get('status')} ({ready.get('reason')})"


def _duration(seconds: float) -> str:
    """A Go duration (``1.5s``) from seconds."""
    return f"{seconds:g}s"
