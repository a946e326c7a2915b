"""A local multi-cluster control plane on real ``kube-apiserver`` and ``etcd``.

One etcd serves every API server (each under its own ``--etcd-prefix``): the
control plane at 127.0.0.1 and one member per loopback address 127.0.1.N, so
members are addressed by IP as the agent demands.  The control plane gets the
clusterhealth CRDs, and for every member a ``Cluster`` whose ``secretRef``
Secret holds a CA bundle and a token for that member (Karmada's Secret shape).
Each member also gets the MCI provider's read-only identity, as
``charts/mci-provider`` ``target=member`` makes it (a ServiceAccount that may
read Services and EndpointSlices), and the control plane a Secret with its
token for each member in :data:`MCI_CREDENTIALS_NAMESPACE`: the credentials
the provider reads members with by default.

With ``EnvironmentConfig(control_plane="karmada")`` the control plane is a
Karmada API made of Karmada's own parts (:mod:`clusterhealth_localenv.karmada`):
Clusters served by ``karmada-aggregated-apiserver`` behind an APIService,
Karmada's CRDs instead of ours, and ``karmada-controller-manager`` writing
``Ready`` on the members.  Clients, kubeconfigs and member registration are the
same in both modes.

With ``EnvironmentConfig(nodes=NodeSettings())`` members (and, if asked, the
control plane's own cluster) get Nodes that run containers
(:mod:`clusterhealth_localenv.nodes`): every API server of the environment
moves from loopback to the Nodes' network in 198.18.0.0/15, where Pods reach
it (their own through the ``kubernetes`` Service, the control plane's at its
address).

The tests, the benchmarks and ``make demo`` all use this module.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import datetime
import json
import logging
import pathlib
import secrets
import shutil
import signal
import ssl
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import yaml

from clusterhealth_core.api import crds as crd_files
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config as kubecfg
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import binaries as bins
from clusterhealth_localenv import karmada, nodes, pki, processes, workloads

log = logging.getLogger(__name__)

CONTROL_PLANE = "control-plane"
_AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}
CLUSTER_SECRET_NAMESPACE = "karmada-cluster"
MCI_CREDENTIALS_NAMESPACE = "clusterhealth-mci-credentials"
"""Where the MCI provider's own member Secrets are (one per Cluster, named like it)."""
MCI_READER = ("clusterhealth-system", "clusterhealth-mci-provider")
"""Namespace and name of the MCI provider's read-only ServiceAccount in every member."""
MCI_READER_RULES = (
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
     "verbs": ["get", "list", "watch"]},
)
"""What that identity may do (the chart's member ClusterRole; a chart test compares them)."""
_TOKEN_SECONDS = 7 * 24 * 3600
_RBAC = "rbac.authorization.k8s.io"
_CLUSTER_ROLES = resources.Resource(_RBAC, "v1", "clusterroles", "ClusterRole", False)
_CLUSTER_ROLE_BINDINGS = resources.Resource(_RBAC, "v1", "clusterrolebindings",
                                            "ClusterRoleBinding", False)
ETCD_PREFIX = "/clusterhealth"
BARE_SERVICE_RANGE = "198.18.0.0/20"
"""``--service-cluster-ip-range`` of an API server without Nodes (RFC 2544, never 10/8).

No Pod or kube-proxy is there, so nothing connects to these addresses; the
range is apart from the Nodes' (198.18.64.0/18), the test hosts'
(198.18.128.0/17) and the pod networks' (198.19.0.0/16)."""
BARE_KUBERNETES_SERVICE = "198.18.0.1"
"""The ClusterIP of ``default/kubernetes`` there (the range's first address)."""
"""Every API server of the environment keeps its objects under ``/clusterhealth/<name>``."""

StartError = processes.StartError
"""The environment could not start; the message quotes the failing log."""
free_port = processes.free_port
ControlPlane = Literal["ours", "karmada"]


@dataclasses.dataclass
class ApiServer:
    """One kube-apiserver of the environment and how to reach it."""

    name: str
    host: str
    port: int
    directory: pathlib.Path
    process: processes.ManagedProcess
    token: str

    @property
    def url(self) -> str:
        """``https://<ip>:<port>``."""
        return f"https://{self.host}:{self.port}"

    @property
    def kubeconfig(self) -> pathlib.Path:
        """The admin kubeconfig (client certificate in ``system:masters``)."""
        return self.directory / "admin.kubeconfig"

    def credentials(self) -> kubecfg.Credentials:
        """Admin credentials read from the kubeconfig."""
        return kubecfg.load_kubeconfig(self.kubeconfig)


@dataclasses.dataclass(frozen=True)
class EnvironmentConfig:
    """What to start."""

    members: Sequence[str] = ("member1", "member2")
    workdir: pathlib.Path | None = None
    kubernetes_version: str = bins.KUBERNETES_VERSION
    start_timeout: float = 90.0
    audit: bool = False
    """Write every API server's audit log (Metadata level, one JSON line per request
    stage after the request was received): the witness of who wrote what."""
    control_plane: ControlPlane = "ours"
    """``"ours"``: our CRDs (Cluster a CRD with a list-map of conditions).
    ``"karmada"``: Karmada's API from Karmada's own parts (see :mod:`.karmada`)."""
    karmada: karmada.KarmadaSettings = dataclasses.field(
        default_factory=karmada.KarmadaSettings)
    """How Karmada's parts run in Karmada mode."""
    workloads: workloads.WorkloadSettings | None = None
    """Members that run workloads (a controller manager, a scheduler and kwok's simulated
    Nodes each, see :mod:`.workloads`); None: bare API servers.  Members with real
    ``nodes`` get no kwok."""
    nodes: nodes.NodeSettings | None = None
    """Clusters whose Nodes run containers (kubelet, containerd, kube-proxy, CoreDNS; see
    :mod:`.nodes`); None: none."""
    register_members: bool = True
    """Register every member (a Cluster and its Secret); False leaves that to the test
    (``clusterhealth join``)."""
    token_controllers: bool = False
    """Run ``kube-controller-manager`` with only the controllers that fill ServiceAccount
    token Secrets and collect garbage, on every API server, as a real cluster has them."""
    crds: bool = True
    """Install our CRDs and register the members at start.  False leaves both to the
    caller, as a user installs them: ``helm install`` of ``charts/clusterhealth-crds``,
    then :meth:`LocalEnvironment.register_members` (what ``karmadactl join`` does).
    Only in our mode (Karmada's API brings its own CRDs)."""


class LocalEnvironment:
    """Start, stop and restart the control plane and member API servers."""

    def __init__(self, config: EnvironmentConfig = EnvironmentConfig()) -> None:
        self.config = config
        self._own_workdir = config.workdir is None
        self.workdir = config.workdir or pathlib.Path(
            tempfile.mkdtemp(prefix="clusterhealth-env-")
        )
        self.binaries: bins.Binaries | None = None
        self.ca = pki.CertificateAuthority()
        self.etcd: processes.ManagedProcess | None = None
        self.etcd_url = ""
        self.servers: dict[str, ApiServer] = {}
        self.karmada: karmada.KarmadaControlPlane | None = None
        """Karmada's processes, in Karmada mode (after :meth:`start`)."""
        self._front_proxy: karmada.FrontProxy | None = None
        self._karmada_extras: tuple[pathlib.Path | None, bins.KarmadaWebhook | None,
                                    pathlib.Path | None] = (None, None, None)
        self.workloads: dict[str, workloads.MemberWorkloads] = {}
        self.token_controllers: list[processes.ManagedProcess] = []
        """``EnvironmentConfig.token_controllers``: one per API server."""
        """Per member, what runs its workloads (with ``EnvironmentConfig.workloads``)."""
        self.node_env: nodes.NodeEnvironment | None = None
        """The clusters with Nodes that run containers (with ``EnvironmentConfig.nodes``)."""

    # --- lifecycle -------------------------------------------------------

    @property
    def is_karmada(self) -> bool:
        """Whether the control plane is Karmada's (``control_plane="karmada"``)."""
        return self.config.control_plane == "karmada"

    async def start(self) -> None:
        """Start etcd and every API server; install CRDs; register the members.

        In Karmada mode also start ``karmada-aggregated-apiserver`` (registered
        as an APIService) and ``karmada-controller-manager``, and wait until
        Karmada reports every member Ready (``KarmadaSettings.wait_members_ready``).
        """
        if self.config.control_plane not in ("ours", "karmada"):
            raise ValueError(f"unknown control_plane {self.config.control_plane!r}")
        karmada_binaries: bins.KarmadaBinaries | None = None
        if self.is_karmada:
            self.binaries, karmada_binaries, self._karmada_extras = await asyncio.gather(
                asyncio.to_thread(bins.ensure_kubernetes, self.config.kubernetes_version),
                asyncio.to_thread(bins.ensure_karmada, self.config.karmada.version),
                asyncio.to_thread(_karmada_extras, self.config.karmada,
                                  self.config.kubernetes_version),
            )
            self._front_proxy = karmada.FrontProxy.create(self.workdir / "front-proxy")
        else:
            self.binaries = await asyncio.to_thread(
                bins.ensure_kubernetes, self.config.kubernetes_version
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        names = [CONTROL_PLANE, *self.config.members]
        if self.config.nodes is not None:
            self.node_env = self._node_environment(self.config.nodes, names)
            if self.node_env.wanted:
                await self.node_env.prepare()
            else:
                self.node_env = None  # no cluster gets Nodes
        parts: asyncio.Task[bins.WorkloadBinaries] | None = None
        if self.config.workloads is not None and self._kwok_members():
            parts = asyncio.create_task(asyncio.to_thread(
                bins.ensure_workload_parts, self.config.kubernetes_version,
                self.config.workloads.kwok_version))
        (self.workdir / "ca.crt").write_bytes(self.ca.cert_pem)
        await self._start_etcd()
        for index, name in enumerate(names):
            host = "127.0.0.1" if name == CONTROL_PLANE else f"127.0.1.{index}"
            if self.node_env is not None:  # Pods reach every API server of the environment
                host = self.node_env.api_host(name)
            self.servers[name] = self._prepare_server(name, host)
        for server in self.servers.values():
            server.process.start()
        await asyncio.gather(*(self._wait_ready(s) for s in self.servers.values()))
        if karmada_binaries is None:
            if self.config.crds:
                await self._install_crds(crd_files.load_crds())
        else:
            await self._start_karmada(karmada_binaries)
        if parts is not None:
            await self._start_workloads(await parts)
        if self.node_env is not None:
            await self._start_nodes(self.node_env)
        if self.config.token_controllers:
            await self._start_token_controllers()
        if self.config.register_members and (self.config.crds or self.is_karmada):
            await self.register_members()
        if self.karmada is not None:
            async with self.client() as api:
                await self.karmada.start_chain(api)
                if self.config.karmada.wait_members_ready:
                    await self.karmada.wait_members_ready(api, self.config.members)

    async def stop(self) -> None:
        """Stop every process; remove the work directory if this object made it.

        Clusters with Nodes are stopped first, and what they changed on this machine
        (cgroups, kernel settings) is undone; their network goes after the API servers
        that listen on it.
        """
        try:
            if self.node_env is not None:
                await self.node_env.stop()
        finally:
            if self.karmada is not None:
                await self.karmada.stop()
            await asyncio.gather(*(p.stop() for p in self.token_controllers))
            await asyncio.gather(*(w.stop() for w in self.workloads.values()))
            await asyncio.gather(*(s.process.stop() for s in self.servers.values()))
            if self.etcd is not None:
                await self.etcd.stop()
            if self.node_env is not None:
                await self.node_env.remove_network()
            if self._own_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    async def __aenter__(self) -> LocalEnvironment:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def stop_server(self, name: str, *, kill: bool = False) -> None:
        """Stop one API server (SIGTERM, or SIGKILL with ``kill``)."""
        server = self.servers[name]
        if kill:
            server.process.kill()
        await server.process.stop()

    def pause_server(self, name: str) -> None:
        """Freeze one API server (SIGSTOP): nothing answers, as in a partition.

        Connections still open but no request is answered, as when the network
        between the server and its clients drops every packet.
        """
        self.servers[name].process.kill(signal.SIGSTOP)

    def resume_server(self, name: str) -> None:
        """Let a paused API server run again (SIGCONT): it answers at once."""
        self.servers[name].process.kill(signal.SIGCONT)

    async def start_server(self, name: str) -> None:
        """Start a stopped API server again on the same address and wait for it."""
        server = self.servers[name]
        server.process.start()
        await self._wait_ready(server)

    # --- access ----------------------------------------------------------

    @property
    def members(self) -> list[str]:
        """Names of the member clusters."""
        return list(self.config.members)

    def client(self, name: str = CONTROL_PLANE, **kwargs: Any) -> kube.ApiClient:
        """A new admin client for one API server (the caller closes it)."""
        return kube.ApiClient(self.servers[name].credentials(), **kwargs)

    def kubeconfig(self, name: str = CONTROL_PLANE) -> pathlib.Path:
        """The admin kubeconfig path of one API server."""
        return self.servers[name].kubeconfig

    def audit_log(self, name: str = CONTROL_PLANE) -> pathlib.Path:
        """Where one API server writes its audit log (``EnvironmentConfig.audit``)."""
        return self.servers[name].directory / "audit.log"

    def audit_events(self, name: str = CONTROL_PLANE, *,
                     containing: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """Every audit event one API server has written so far, oldest first.

        With ``containing``, only the lines holding each of those strings are
        decoded (a log shared by many tests grows large; decoding is the cost).
        """
        if not self.config.audit:
            raise RuntimeError("audit logging is off: EnvironmentConfig(audit=True)")
        path = self.audit_log(name)
        if not path.exists():
            return []
        events = []
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if all(text in line for text in containing):
                    with contextlib.suppress(ValueError):
                        events.append(json.loads(line))
        return events

    def node_cluster(self, name: str) -> nodes.NodeCluster:
        """The Nodes of cluster ``name`` (``EnvironmentConfig.nodes``).

        Load images into them, stop and start kubelets, list them.
        """
        if self.node_env is None or name not in self.node_env.clusters:
            raise KeyError(f"cluster {name!r} has no Nodes that run containers "
                           "(EnvironmentConfig.nodes)")
        return self.node_env.clusters[name]

    # --- internals -------------------------------------------------------

    def _node_environment(self, settings: nodes.NodeSettings,
                          names: Sequence[str]) -> nodes.NodeEnvironment:
        if self.is_karmada and settings.control_plane_nodes:
            raise ValueError("the Karmada control plane runs no Nodes (control_plane_nodes=0)")
        return nodes.NodeEnvironment(
            settings, {name: index for index, name in enumerate(names)},
            {name: settings.count(name, name == CONTROL_PLANE) for name in names},
            self.workdir, self.workdir / "logs", self.config.kubernetes_version)

    def _kwok_members(self) -> list[str]:
        """The members kwok's Nodes are for (those without real Nodes)."""
        return [m for m in self.config.members
                if self.node_env is None or not self.node_env.has_nodes(m)]

    async def _start_nodes(self, node_env: nodes.NodeEnvironment) -> None:
        names = list(node_env.wanted)
        contexts = {}
        for name in names:
            context = self.servers[name].credentials().ssl_context()
            assert isinstance(context, ssl.SSLContext)
            contexts[name] = context
        clients = {name: self.client(name) for name in names}
        try:
            await node_env.start(
                {name: (self.servers[name].url, self.servers[name].directory,
                        self.servers[name].kubeconfig) for name in names},
                self.ca, self.workdir / "ca.crt", contexts, clients, self.config.start_timeout)
        finally:
            for api in clients.values():
                await api.close()

    async def _start_karmada(self, binaries: bins.KarmadaBinaries) -> None:
        """Karmada's CRDs, its aggregated apiserver and APIService (not its controllers)."""
        control_plane = self.servers[CONTROL_PLANE]
        self.karmada = karmada.KarmadaControlPlane(
            binaries, self.config.karmada, self.workdir / "karmada", self.workdir / "logs",
            self.ca, control_plane.kubeconfig, self.etcd_url,
            # One etcd prefix with the kube-apiserver, as Karmada shares /registry.
            f"{ETCD_PREFIX}/{CONTROL_PLANE}", self.config.start_timeout,
            scheduler=self._karmada_extras[0], webhook=self._karmada_extras[1],
            kube_controller_manager=self._karmada_extras[2],
        )
        self.karmada.start_aggregated_apiserver()
        context = control_plane.credentials().ssl_context()
        assert isinstance(context, ssl.SSLContext)
        await asyncio.gather(
            self._install_crds(karmada.load_crds(binaries, self.config.karmada.crds)),
            self.karmada.wait_aggregated_apiserver(context),
        )
        async with self.client() as api:
            await self.karmada.register(api)
        await self.karmada.start_kube_controller_manager()

    async def _start_workloads(self, parts: bins.WorkloadBinaries) -> None:
        """Per member: controller manager, scheduler, kwok; wait for them and the Nodes."""
        settings = self.config.workloads
        assert settings is not None
        names = [CONTROL_PLANE, *self.config.members]
        for member in self._kwok_members():
            server = self.servers[member]
            runner = workloads.MemberWorkloads(
                member, names.index(member), settings, parts, server.directory / "workloads",
                server.kubeconfig, self.ca, self.workdir / "logs")
            runner.prepare()
            runner.start()
            self.workloads[member] = runner

        async def ready(member: str) -> None:
            async with self.client(member) as api:
                context = self.servers[member].credentials().ssl_context()
                assert isinstance(context, ssl.SSLContext)
                await self.workloads[member].wait_ready(api, context, self.config.start_timeout)

        await asyncio.gather(*(ready(m) for m in self._kwok_members()))

    async def _start_token_controllers(self) -> None:
        """Per API server, a kube-controller-manager: token Secrets filled, garbage collected."""
        parts = await asyncio.to_thread(bins.ensure_workload_parts,
                                        self.config.kubernetes_version)
        health: list[tuple[processes.ManagedProcess, str]] = []
        for server in self.servers.values():
            cert, key = self.ca.serving(f"{server.name}-token-controllers", [server.host],
                                        ["localhost"]).write(server.directory, "tokens")
            port = free_port(server.host)
            process = processes.ManagedProcess(f"token-controllers[{server.name}]", [
                str(parts.kube_controller_manager), f"--kubeconfig={server.kubeconfig}",
                f"--authentication-kubeconfig={server.kubeconfig}",
                f"--authorization-kubeconfig={server.kubeconfig}",
                f"--bind-address={server.host}", f"--secure-port={port}",
                f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
                f"--service-account-private-key-file={server.directory / 'sa.key'}",
                f"--root-ca-file={self.workdir / 'ca.crt'}",
                "--controllers=serviceaccount-token,garbagecollector",
                "--leader-elect=false", "--profiling=false", "--v=1",
            ], self.workdir / "logs" / f"{server.name}-token-controllers.log")
            process.start()
            self.token_controllers.append(process)
            health.append((process, f"https://{server.host}:{port}/healthz"))
        context = self.servers[CONTROL_PLANE].credentials().ssl_context()
        assert isinstance(context, ssl.SSLContext)
        for process, url in health:
            await processes.wait_answering(process, url, context, self.config.start_timeout)

    async def _start_etcd(self) -> None:
        assert self.binaries is not None
        client_port = free_port("127.0.0.1")
        peer_port = free_port("127.0.0.1")
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        data = self.workdir / "etcd"
        self.etcd = processes.ManagedProcess(
            "etcd",
            [
                str(self.binaries.etcd), "--name", "clusterhealth",
                "--data-dir", str(data),
                "--listen-client-urls", self.etcd_url,
                "--advertise-client-urls", self.etcd_url,
                "--listen-peer-urls", peer_url,
                "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", f"clusterhealth={peer_url}",
                "--unsafe-no-fsync", "--log-level", "warn",
                "--listen-metrics-urls", "",
            ],
            self.workdir / "logs" / "etcd.log",
        )
        self.etcd.start()
        deadline = time.monotonic() + self.config.start_timeout
        while time.monotonic() < deadline:
            if not self.etcd.running():
                raise StartError(f"etcd exited:\n{self.etcd.log_tail()}")
            if await asyncio.to_thread(processes.http_ok, f"{self.etcd_url}/health", None):
                return
            await asyncio.sleep(0.1)
        raise StartError(f"etcd not healthy in time:\n{self.etcd.log_tail()}")

    def _prepare_server(self, name: str, host: str) -> ApiServer:
        assert self.binaries is not None
        directory = self.workdir / name
        directory.mkdir(parents=True, exist_ok=True)
        port = free_port(host)
        node_env = self.node_env
        with_nodes = node_env is not None and node_env.has_nodes(name)
        ips = [host, BARE_KUBERNETES_SERVICE] if node_env is None else node_env.serving_ips(name)
        serving = self.ca.serving(
            f"{name}-apiserver", ips,
            ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
             f"kubernetes.default.svc.{nodes.CLUSTER_DOMAIN}"],
        )
        tls_cert, tls_key = serving.write(directory, "serving")
        admin_cert, admin_key = self.ca.client("clusterhealth-admin", "system:masters").write(
            directory, "admin"
        )
        sa_private, sa_public = pki.service_account_keys()
        (directory / "sa.key").write_bytes(sa_private)
        (directory / "sa.pub").write_bytes(sa_public)
        token = secrets.token_hex(24)
        (directory / "tokens.csv").write_text(
            f'{token},clusterhealth-karmada,clusterhealth-karmada,"system:masters"\n'
        )
        ca_file = self.workdir / "ca.crt"
        pki.write_kubeconfig(directory / "admin.kubeconfig", name, f"https://{host}:{port}",
                          ca_file, admin_cert, admin_key)
        argv = [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers={self.etcd_url}",
            f"--etcd-prefix={ETCD_PREFIX}/{name}",
            f"--bind-address={host}",
            f"--advertise-address={host}",
            f"--secure-port={port}",
            f"--tls-cert-file={tls_cert}",
            f"--tls-private-key-file={tls_key}",
            f"--client-ca-file={ca_file}",
            f"--token-auth-file={directory / 'tokens.csv'}",
            f"--service-account-key-file={directory / 'sa.pub'}",
            f"--service-account-signing-key-file={directory / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--api-audiences=https://kubernetes.default.svc",
            "--allow-privileged=true",
            "--profiling=false",
            f"--cert-dir={directory / 'certs'}",
            "--v=0",
        ]
        if node_env is not None and with_nodes:
            argv += node_env.apiserver_flags(name, directory, self.ca)
        else:
            # No Pods run here, so none needs a service-account token mounted.
            services = BARE_SERVICE_RANGE if node_env is None else node_env.service_range(name)
            argv += ["--authorization-mode=RBAC", f"--service-cluster-ip-range={services}",
                     "--disable-admission-plugins=ServiceAccount"]
        if name == CONTROL_PLANE and self._front_proxy is not None:
            argv += self._front_proxy.apiserver_flags()  # karmada-apiserver's aggregation
        if self.config.audit:
            policy = directory / "audit-policy.yaml"
            policy.write_text(yaml.safe_dump(_AUDIT_POLICY, sort_keys=False))
            argv += [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={directory / 'audit.log'}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
                "--audit-log-maxsize=0",
            ]
        process = processes.ManagedProcess(
            f"kube-apiserver[{name}]", argv, self.workdir / "logs" / f"{name}-apiserver.log"
        )
        return ApiServer(name, host, port, directory, process, token)

    async def _wait_ready(self, server: ApiServer) -> None:
        context = server.credentials().ssl_context()
        assert isinstance(context, ssl.SSLContext)
        await processes.wait_answering(server.process, f"{server.url}/readyz", context,
                                       self.config.start_timeout)

    async def _install_crds(self, crds: Sequence[dict[str, Any]]) -> None:
        async with self.client() as api:
            for crd in crds:
                with contextlib.suppress(errors.Conflict):
                    await api.create(resources.CRDS, crd)
            for crd in crds:
                await _wait_established(api, crd["metadata"]["name"], self.config.start_timeout)

    async def register_members(self, mci_credentials: bool = True) -> None:
        """Register every member in the control plane, as ``karmadactl join`` (Push) does.

        A Secret ``karmada-cluster/<member>`` with ``caBundle`` and a token of the member's
        (``system:masters``), and a ``Cluster`` with ``spec.apiEndpoint`` and ``secretRef``
        to it; what exists already is kept.  Needs the Cluster CRD.  With
        ``mci_credentials`` also the MCI provider's read-only identity in each member and
        its Secret in :data:`MCI_CREDENTIALS_NAMESPACE` (False: the caller installs them,
        as the MCI chart's README does).
        """
        async with self.client() as api:
            with contextlib.suppress(errors.Conflict):
                await api.create(
                    resources.NAMESPACES,
                    {"metadata": {"name": CLUSTER_SECRET_NAMESPACE}},
                )
            for name in self.config.members:
                server = self.servers[name]
                secret = {
                    "metadata": {"name": name, "namespace": CLUSTER_SECRET_NAMESPACE},
                    "type": "Opaque",
                    "data": {
                        "caBundle": base64.b64encode(self.ca.cert_pem).decode(),
                        "token": base64.b64encode(server.token.encode()).decode(),
                    },
                }
                with contextlib.suppress(errors.Conflict):
                    await api.create(resources.SECRETS, secret)
                cluster = {
                    "apiVersion": resources.CLUSTERS.api_version,
                    "kind": "Cluster",
                    "metadata": {"name": name},
                    "spec": {
                        "apiEndpoint": server.url,
                        "syncMode": "Push",
                        "secretRef": {"namespace": CLUSTER_SECRET_NAMESPACE, "name": name},
                    },
                }
                with contextlib.suppress(errors.Conflict):
                    await api.create(resources.CLUSTERS, cluster)
            if not mci_credentials:
                return
            await _create_namespace(api, MCI_CREDENTIALS_NAMESPACE)
            tokens = await asyncio.gather(*(self._mci_reader(name)
                                            for name in self.config.members))
            for name, token in zip(self.config.members, tokens, strict=True):
                with contextlib.suppress(errors.Conflict):
                    await api.create(resources.SECRETS, {
                        "metadata": {"name": name, "namespace": MCI_CREDENTIALS_NAMESPACE},
                        "type": "Opaque",
                        "data": {"caBundle": base64.b64encode(self.ca.cert_pem).decode(),
                                 "token": base64.b64encode(token.encode()).decode()}})

    async def _mci_reader(self, member: str) -> str:
        """Make the MCI provider's read-only identity in ``member``; a token of it."""
        namespace, name = MCI_READER
        async with self.client(member) as api:
            await _create_namespace(api, namespace)
            objects: list[tuple[resources.Resource, dict[str, Any]]] = [
                (resources.SERVICE_ACCOUNTS, {"metadata": {"name": name,
                                                           "namespace": namespace}}),
                (_CLUSTER_ROLES, {"metadata": {"name": name}, "rules": list(MCI_READER_RULES)}),
                (_CLUSTER_ROLE_BINDINGS, {
                    "metadata": {"name": name},
                    "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": name},
                    "subjects": [{"kind": "ServiceAccount", "name": name,
                                  "namespace": namespace}]}),
            ]
            for resource, body in objects:
                with contextlib.suppress(errors.Conflict):
                    await api.create(resource, body)
            answer = await api.request(
                "POST", resources.SERVICE_ACCOUNTS.path(name, namespace=namespace,
                                                        subresource="token"),
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"audiences": ["https://kubernetes.default.svc"],
                               "expirationSeconds": _TOKEN_SECONDS}})
        return str(answer["status"]["token"])


def audit_time(event: Mapping[str, Any],
               stamp: str = "requestReceivedTimestamp") -> datetime.datetime:
    """One of an audit event's stamps (``requestReceivedTimestamp``, ``stageTimestamp``).

    The API server's clock, in UTC to the microsecond: what the audit log witnesses
    (:meth:`LocalEnvironment.audit_events`).
    """
    return datetime.datetime.fromisoformat(str(event[stamp]))


async def _create_namespace(api: kube.ApiClient, name: str) -> None:
    with contextlib.suppress(errors.Conflict):
        await api.create(resources.NAMESPACES, {"metadata": {"name": name}})


def _karmada_extras(settings: karmada.KarmadaSettings, kubernetes_version: str
                    ) -> tuple[pathlib.Path | None, bins.KarmadaWebhook | None,
                               pathlib.Path | None]:
    """Karmada's scheduler and webhook and a ``kube-controller-manager``, if the settings ask."""
    scheduler = bins.ensure_karmada_scheduler(settings.version) if settings.scheduler else None
    webhook = bins.ensure_karmada_webhook(settings.version) if settings.webhook else None
    kcm = (bins.ensure_workload_parts(kubernetes_version).kube_controller_manager
           if settings.kube_controller_manager else None)
    return scheduler, webhook, kcm


async def _wait_established(api: kube.ApiClient, name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        crd = await api.get(resources.CRDS, name)
        for condition in (crd.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Established" and condition.get("status") == "True":
                return
        await asyncio.sleep(0.1)
    raise StartError(f"CRD {name} not established after {timeout}s")
