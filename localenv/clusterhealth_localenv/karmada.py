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
  ``CompleteAPIEnablements`` on the member Clusters;
- on request (:class:`KarmadaSettings`), the rest of Karmada's chain on members
  that run workloads: its propagation controllers, ``karmada-scheduler``,
  ``karmada-webhook`` (registered with Karmada's own webhook configuration) and
  its failover (:class:`KarmadaFailover`: the ``Failover`` gate, NoExecute
  eviction, and the ClusterTaintPolicies that turn ``Ready`` into NoExecute
  taints, since Karmada >= 1.15 derives none from ``Ready`` itself).

The binaries and CRD manifests come from :func:`binaries.ensure_karmada` (and
``ensure_karmada_scheduler``, ``ensure_karmada_webhook``).
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
MUTATING_WEBHOOKS = resources.Resource(
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration", namespaced=False)
VALIDATING_WEBHOOKS = resources.Resource(
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration", namespaced=False)
WEBHOOK_SERVICE_URL = "https://karmada-webhook.karmada-system.svc:443"
"""Where Karmada's webhook configuration sends the API server (replaced by our address)."""

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

PROPAGATION: tuple[str, ...] = ("cluster", "namespace", "binding", "bindingStatus",
                                "execution", "workStatus")
"""Karmada's controllers that carry a template to the members and its status back: the
``cluster`` controller makes each member's execution space (``karmada-es-<member>``),
``namespace`` propagates the template's namespace (with the resource detector, always on,
and ``karmada-scheduler``)."""
BESIDE_OUR_FAILOVER: tuple[str, ...] = ("cluster", "namespace", "binding", "bindingStatus")
"""Karmada's controllers that keep carrying templates when ours fail over: without its
``execution`` and ``workStatus``, which read the members through informers that only its
``clusterStatus`` starts (v1.18.2; Karmada's own TODO in that controller), so replacing
``clusterStatus`` replaces those two as well."""
FAILOVER: tuple[str, ...] = ("clusterStatus", "clustertaintpolicy", "gracefulEviction")
"""Karmada's failover controllers besides ``cluster`` (whose taint manager evicts):
``Ready`` from probes, NoExecute taints from ClusterTaintPolicies, graceful eviction."""
FAILOVER_CHAIN: tuple[str, ...] = (*PROPAGATION, *FAILOVER)
"""Karmada's whole failover chain, in ``karmada-controller-manager --controllers``."""
NOT_READY = "cluster.karmada.io/not-ready"
UNREACHABLE = "cluster.karmada.io/unreachable"


@dataclasses.dataclass(frozen=True)
class KarmadaFailover:
    """Karmada's failover switched on: as shipped, nothing is ever evicted.

    Karmada v1.18.2 evicts from a NoExecute-tainted cluster only with the
    ``Failover`` feature gate and ``--enable-no-execute-taint-eviction`` (both
    off by default), and since 1.15 writes no NoExecute taint from ``Ready``:
    a ClusterTaintPolicy does (:func:`taint_policies`, admitted by
    ``karmada-webhook --allow-no-execute-taint-policy``).  The defaults below
    are Karmada's own.
    """

    eviction_rate: float = 0.5
    """``--resource-eviction-rate``: bindings evicted per second."""
    purge_mode: str = "Gracefully"
    """``--no-execute-taint-eviction-purge-mode``."""
    graceful_eviction_timeout: float = 600.0
    """``--graceful-eviction-timeout``."""
    taint_policies: bool = True
    """Install :func:`taint_policies` (Ready False/Unknown -> NoExecute taints)."""

    def controller_manager_args(self) -> list[str]:
        """The flags that switch Karmada's eviction on."""
        return ["--feature-gates=Failover=true", "--enable-no-execute-taint-eviction=true",
                f"--no-execute-taint-eviction-purge-mode={self.purge_mode}",
                f"--resource-eviction-rate={self.eviction_rate:g}",
                f"--graceful-eviction-timeout={_duration(self.graceful_eviction_timeout)}"]


def taint_policies() -> list[dict[str, Any]]:
    """ClusterTaintPolicies giving every Cluster NoExecute taints from ``Ready``.

    What Karmada's documentation gives for failover since 1.15 (the cluster
    controller writes only the NoSchedule ones): ``Ready`` False ->
    ``not-ready:NoExecute``, Unknown -> ``unreachable:NoExecute``, each removed
    when ``Ready`` is True again.
    """
    policies = []
    for name, status, key in (("ready-false", "False", NOT_READY),
                              ("ready-unknown", "Unknown", UNREACHABLE)):
        policies.append({
            "apiVersion": resources.CLUSTER_TAINT_POLICIES.api_version,
            "kind": "ClusterTaintPolicy",
            "metadata": {"name": f"clusterhealth-localenv-{name}"},
            "spec": {
                "addOnConditions": [{"conditionType": "Ready", "operator": "In",
                                     "statusValues": [status]}],
                "removeOnConditions": [{"conditionType": "Ready", "operator": "In",
                                        "statusValues": ["True"]}],
                "taints": [{"key": key, "effect": "NoExecute"}],
            },
        })
    return policies


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
    """Whether start-up waits until Karmada reports every member Ready=True (needs
    ``clusterStatus`` among the controllers)."""
    scheduler: bool = False
    """Run ``karmada-scheduler`` (as shipped, without the scheduler estimator)."""
    webhook: bool = False
    """Run ``karmada-webhook`` and register Karmada's webhook configuration for it."""
    failover: KarmadaFailover | None = None
    """Karmada's eviction switched on (None: as shipped, off)."""
    crds: tuple[str, ...] | None = CRD_FILES
    """Karmada's CRD files to install; None: every one (its propagation controllers,
    scheduler and webhook watch override policies, quotas and more)."""
    extra_scheduler_args: tuple[str, ...] = ()
    kube_controller_manager: bool = False
    """Run ``kube-controller-manager`` against the Karmada API server with its
    ``namespace`` and ``garbagecollector`` controllers, as Karmada's installers do:
    without them a deleted template keeps its binding (owned by it) and Works."""

    @classmethod
    def chain(cls, controllers: Sequence[str] = FAILOVER_CHAIN,
              failover: KarmadaFailover | None = KarmadaFailover(),
              **overrides: Any) -> KarmadaSettings:
        """Karmada's chain on members that run workloads.

        ``controllers``, its scheduler, its webhook and every CRD; ``failover``
        None leaves Karmada's eviction off.
        """
        return cls(controllers=tuple(controllers), scheduler=True, webhook=True,
                   failover=failover, crds=None, kube_controller_manager=True, **overrides)


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
              files: Sequence[str] | None = CRD_FILES) -> list[dict[str, Any]]:
    """Karmada's CRD documents from the build's manifests, in ``files`` order (None: all)."""
    crds: list[dict[str, Any]] = []
    names = files if files is not None else sorted(
        path.name for path in binaries.crd_dir.glob("*.yaml"))
    for name in names:
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


def webhook_configurations(manifest: str, url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """Karmada's webhook configuration pointed at ``url`` (``https://<ip>:<port>``)."""
    text = manifest.replace("{{caBundle}}", base64.b64encode(ca_pem).decode())
    text = text.replace(WEBHOOK_SERVICE_URL, url)
    documents = [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]
    kinds = {str(doc.get("kind")) for doc in documents}
    if kinds != {MUTATING_WEBHOOKS.kind, VALIDATING_WEBHOOKS.kind} or WEBHOOK_SERVICE_URL in text:
        raise processes.StartError(
            f"Karmada's webhook configuration has an unexpected shape (kinds {sorted(kinds)})")
    return documents


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
        scheduler: pathlib.Path | None = None,
        webhook: bins.KarmadaWebhook | None = None,
        kube_controller_manager: pathlib.Path | None = None,
    ) -> None:
        self.binaries = binaries
        self.logs = logs
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
        self.scheduler: processes.ManagedProcess | None = None
        """``karmada-scheduler`` (``KarmadaSettings.scheduler``)."""
        self.scheduler_health_port = processes.free_port("127.0.0.1")
        if scheduler is not None:
            self.scheduler = processes.ManagedProcess(
                "karmada-scheduler", self._scheduler_argv(scheduler),
                logs / "karmada-scheduler.log")
        self.kube_controller_manager: processes.ManagedProcess | None = None
        """``kube-controller-manager`` for the Karmada API server's own objects
        (``KarmadaSettings.kube_controller_manager``)."""
        self.kcm_port = processes.free_port("127.0.0.1")
        if kube_controller_manager is not None:
            self.kube_controller_manager = processes.ManagedProcess(
                "kube-controller-manager[karmada]", self._kcm_argv(kube_controller_manager),
                logs / "karmada-kube-controller-manager.log")
        self.webhook: processes.ManagedProcess | None = None
        """``karmada-webhook`` (``KarmadaSettings.webhook``)."""
        self.webhook_port = processes.free_port(self.host)
        self._webhook_manifest = ""
        if webhook is not None:
            self._webhook_manifest = webhook.configuration.read_text()
            self.webhook = processes.ManagedProcess(
                "karmada-webhook", self._webhook_argv(webhook.binary),
                logs / "karmada-webhook.log")

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
            *(settings.failover.controller_manager_args() if settings.failover else []),
            *settings.extra_controller_manager_args,
        ]

    def _scheduler_argv(self, binary: pathlib.Path) -> list[str]:
        return [
            str(binary),
            f"--kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            "--enable-scheduler-estimator=false",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{self.scheduler_health_port}",
            *self.settings.extra_scheduler_args,
        ]

    def _kcm_argv(self, binary: pathlib.Path) -> list[str]:
        cert, key = self.ca.serving("karmada-kube-controller-manager", ["127.0.0.1"],
                                    ["localhost"]).write(self.directory, "kcm-serving")
        kubeconfig = str(self.kubeconfig)
        return [str(binary), f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1", f"--secure-port={self.kcm_port}",
                f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
                "--controllers=namespace,garbagecollector", "--leader-elect=false",
                "--profiling=false", "--v=1"]

    def _webhook_argv(self, binary: pathlib.Path) -> list[str]:
        certs = self.directory / "webhook-certs"
        certs.mkdir(parents=True, exist_ok=True)
        self.ca.serving("karmada-webhook", [self.host],
                        ["karmada-webhook.karmada-system.svc", "localhost"]).write(certs, "tls")
        argv = [
            str(binary),
            f"--kubeconfig={self.kubeconfig}",
            f"--bind-address={self.host}",
            f"--secure-port={self.webhook_port}",
            f"--cert-dir={certs}",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{processes.free_port('127.0.0.1')}",
        ]
        if self.settings.failover is not None and self.settings.failover.taint_policies:
            argv.append("--allow-no-execute-taint-policy=true")
        return argv

    @property
    def webhook_url(self) -> str:
        """``https://<ip>:<port>`` where the API server reaches ``karmada-webhook``."""
        return f"https://{self.host}:{self.webhook_port}"

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

    def configure(self, settings: KarmadaSettings) -> None:
        """Run the stopped parts with other settings from their next start.

        The controllers, timers, failover flags and extra arguments change; which
        parts exist (``scheduler``, ``webhook``) and the CRDs stay as started.
        """
        parts = [self.controller_manager, self.scheduler, self.webhook]
        if any(part is not None and part.running() for part in parts):
            raise RuntimeError("stop Karmada's chain before changing its settings")
        self.settings = settings
        self.controllers = tuple(settings.controllers)
        self.controller_manager.argv = self._controller_manager_argv()
        if self.scheduler is not None:
            self.scheduler.argv = self._scheduler_argv(pathlib.Path(self.scheduler.argv[0]))
        if self.webhook is not None:
            self.webhook.argv = self._webhook_argv(pathlib.Path(self.webhook.argv[0]))

    async def start_scheduler(self) -> None:
        """Start ``karmada-scheduler`` (again); wait for its health probe."""
        if self.scheduler is None:
            raise RuntimeError("karmada-scheduler is off: KarmadaSettings(scheduler=True)")
        self.scheduler.start()
        await processes.wait_answering(
            self.scheduler, f"http://127.0.0.1:{self.scheduler_health_port}/healthz", None,
            self.timeout)

    async def stop_scheduler(self) -> None:
        """Stop ``karmada-scheduler`` (if it runs)."""
        if self.scheduler is not None:
            await self.scheduler.stop()

    async def start_webhook(self, api: kube.ApiClient) -> None:
        """Start ``karmada-webhook``, wait until it serves, then register it.

        Registered with Karmada's own webhook configuration (``failurePolicy:
        Fail``), pointed at this process's address instead of its Service.
        """
        if self.webhook is None:
            raise RuntimeError("karmada-webhook is off: KarmadaSettings(webhook=True)")
        self.webhook.start()
        context = ssl.create_default_context(cadata=self.ca.cert_pem.decode())
        await processes.wait_answering(self.webhook, f"{self.webhook_url}/readyz/", context,
                                       self.timeout)
        for document in webhook_configurations(self._webhook_manifest, self.webhook_url,
                                               self.ca.cert_pem):
            resource = (MUTATING_WEBHOOKS if document["kind"] == MUTATING_WEBHOOKS.kind
                        else VALIDATING_WEBHOOKS)
            try:
                await api.create(resource, document)
            except errors.Conflict:
                live = await api.get(resource, document["metadata"]["name"])
                document["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
                await api.update(resource, document)

    async def stop_webhook(self, api: kube.ApiClient | None) -> None:
        """Unregister ``karmada-webhook`` (with ``api``), then stop it.

        Unregistered first: with ``failurePolicy: Fail`` a registered webhook
        that does not answer refuses every policy, binding and Work.
        """
        if self.webhook is None:
            return
        if api is not None:
            for document in webhook_configurations(self._webhook_manifest, self.webhook_url,
                                                   self.ca.cert_pem):
                resource = (MUTATING_WEBHOOKS if document["kind"] == MUTATING_WEBHOOKS.kind
                            else VALIDATING_WEBHOOKS)
                with contextlib.suppress(errors.NotFound):
                    await api.delete(resource, document["metadata"]["name"])
        await self.webhook.stop()

    async def install_taint_policies(self, api: kube.ApiClient) -> None:
        """Create :func:`taint_policies` (Ready -> NoExecute taints), if not there."""
        for body in taint_policies():
            with contextlib.suppress(errors.Conflict):
                await api.create(resources.CLUSTER_TAINT_POLICIES, body)

    async def remove_taint_policies(self, api: kube.ApiClient) -> None:
        """Delete :func:`taint_policies` (the taints they set stay, as Karmada leaves them)."""
        for body in taint_policies():
            with contextlib.suppress(errors.NotFound):
                await api.delete(resources.CLUSTER_TAINT_POLICIES, body["metadata"]["name"])

    async def start_kube_controller_manager(self) -> None:
        """Start the Karmada API server's ``kube-controller-manager`` (if it has one)."""
        if self.kube_controller_manager is None:
            return
        self.kube_controller_manager.start()
        context = ssl.create_default_context(cadata=self.ca.cert_pem.decode())
        await processes.wait_answering(self.kube_controller_manager,
                                       f"https://127.0.0.1:{self.kcm_port}/healthz", context,
                                       self.timeout)

    async def start_chain(self, api: kube.ApiClient) -> None:
        """Start every part the settings enable: webhook, controllers, scheduler, policies.

        The API server's own ``kube-controller-manager`` is not part of the chain: it
        runs from :meth:`start_kube_controller_manager` until :meth:`stop`.
        """
        if self.webhook is not None:
            await self.start_webhook(api)
        await self.start_controller_manager()
        if self.scheduler is not None:
            await self.start_scheduler()
        if self.settings.failover is not None and self.settings.failover.taint_policies:
            await self.install_taint_policies(api)

    async def stop_chain(self, api: kube.ApiClient | None) -> None:
        """Stop what :meth:`start_chain` started (the aggregated apiserver keeps serving).

        With ``api``, also unregister the webhook and delete the taint policies, so
        another control plane can take over the same API.
        """
        if api is not None and self.settings.failover is not None \
                and self.settings.failover.taint_policies:
            await self.remove_taint_policies(api)
        await self.stop_scheduler()
        await self.controller_manager.stop()
        await self.stop_webhook(api)

    async def stop(self) -> None:
        """Stop every process, the aggregated apiserver last."""
        await self.stop_chain(None)
        if self.kube_controller_manager is not None:
            await self.kube_controller_manager.stop()
        await self.aggregated.stop()

    def pids(self) -> dict[str, int]:
        """The running processes' pids, by name."""
        return {process.name: process.pid
                for process in (self.aggregated, self.controller_manager, self.scheduler,
                                self.webhook, self.kube_controller_manager)
                if process is not None and process.pid is not None and process.running()}

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
