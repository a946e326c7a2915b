"""Every chart installed as users install them, onto clusters whose Nodes run containers.

The charts' tests render them (``helm template``) and run components as processes;
this module installs them for real, with the ``helm`` and ``kubectl`` binaries, the
images built from the Dockerfiles (:mod:`.images`) loaded into every Node, and the
steps of ``docs/operations.md`` in its order, each command **as the docs write it**
(:func:`install_steps`; ``tests/install`` checks every one still appears in its page):

1. the CRDs (``charts/clusterhealth-crds``);
2. the members registered (what ``karmadactl join`` does: :meth:`.environment.
   LocalEnvironment.register_members`);
3. the control plane (``charts/controlplane``), 4. the remedy controller
   (``charts/remedy``), 5. the MCI provider with its HAProxy sidecar
   (``charts/mci-provider``; its read-only identity in each member, ``target=member``,
   and that identity's token in the control plane);
6. per member the agent's identity in the control plane (``target=controlPlane``,
   a ServiceAccount and its token), its kubeconfig as a Secret in the member, and
   the agent DaemonSet (``charts/agent``).

The commands name kubeconfig contexts as the docs do (``clusterhealth`` and
``karmada`` for the control plane, ``member1``...): :class:`Fleet` writes one
kubeconfig holding them all.  What the local environment changes, and only that:
``image.pullPolicy=Never`` (the images come from archives, no registry), the docs'
placeholders (the control plane's address and CA file, a registry) replaced by the
real ones, and the agent's detection timers (``FleetSettings.agent_values``) so that
a story fits in seconds.  Everything else is the charts' defaults.

The tests (``tests/install``), the benchmark of the components' memory
(``bench.installed``) and the demo on real Nodes (``--real-nodes``) share this.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import os
import pathlib
import shlex
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import yaml

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import binaries, environment, folderimages, images, nodes

REPO = pathlib.Path(__file__).resolve().parents[2]
NAMESPACE = "clusterhealth-system"
"""Where the docs install the components."""
CONTROL_PLANE_CONTEXTS = ("clusterhealth", "karmada", "karmada-apiserver")
"""The names the docs give the control plane's kubeconfig context."""
CP_URL_PLACEHOLDER = "https://192.0.2.10:5443"
CA_PLACEHOLDER = "karmada-ca.crt"
TOKEN_PLACEHOLDER = "$TOKEN"
BUSYBOX = "localhost/clusterhealth/busybox:test"
SHOP = "shop"
WEB_HOST = "shop.example.org"
WEB_PATH = "/cgi-bin/web"
WEB_PORT = 8080
DNS_CONDITION = "ServiceDomainNameResolutionReady"
AGENT_TIMERS = ("detectPeriod=2s", "detectFailureThreshold=6s", "detectSuccessThreshold=6s")
"""The agent's probe period and hysteresis in the tests and the demo (defaults: 5 s,
30 s, 30 s), so a DNS outage is reported in about 8 s instead of 35 s."""


class FleetError(RuntimeError):
    """A step of the install failed; the message names the command and quotes its output."""


@dataclasses.dataclass(frozen=True)
class Step:
    """One command of the install, as the page ``doc`` writes it."""

    text: str
    """The command, one line (the page's ``\\`` continuations joined)."""
    doc: str
    """The page, relative to the repository."""
    cluster: str
    """The cluster the command acts on (an environment's cluster name)."""
    stdin: str | None = None
    """What the page feeds it (a ``<<EOF`` document)."""
    local: tuple[str, ...] = ()
    """Arguments the local environment adds (image pull policy, a timeout)."""
    drop: tuple[str, ...] = ()
    """Arguments of the page left out here (a placeholder registry; a ``--set`` before one
    goes with it)."""
    decode_to: str | None = None
    """The page pipes the output through ``base64 -d`` into this file (in the working
    folder); the install waits until the output is not empty (a token controller)."""
    exists_ok: bool = False
    """The page says "unless it exists": an ``AlreadyExists`` answer is no failure."""

    def argv(self, substitutions: Mapping[str, str]) -> list[str]:
        """The command's words, placeholders replaced, ``drop`` left out, ``local`` added."""
        out: list[str] = []
        for word in shlex.split(self.text):
            if word in self.drop:
                if out and out[-1] == "--set":
                    out.pop()
                continue
            for placeholder, value in substitutions.items():
                word = word.replace(placeholder, value)
            out.append(word)
        return out + list(self.local)


@dataclasses.dataclass(frozen=True)
class FleetSettings:
    """What the install adds to the charts' defaults."""

    agent_values: tuple[str, ...] = AGENT_TIMERS
    """``--set`` values of the agent in every member."""
    rollout_timeout: float = 240.0


def pull_never(chart: str) -> tuple[str, ...]:
    """The values that make a chart use the loaded images (no registry)."""
    values = ["--set", "image.pullPolicy=Never"]
    if chart == "mci-provider":
        values += ["--set", "haproxy.sidecar.image.pullPolicy=Never"]
    return tuple(values)


AGENT_TOKEN_SECRET = """apiVersion: v1
kind: Secret
metadata:
  name: clusterhealth-agent-{member}-token
  annotations: {{kubernetes.io/service-account.name: clusterhealth-agent-{member}}}
type: kubernetes.io/service-account-token
"""
OPERATIONS = "docs/operations.md"
AGENT_README = "charts/agent/README.md"
MCI_README = "charts/mci-provider/README.md"


def control_plane_steps() -> list[Step]:
    """Steps 1, 3, 4 and 5 of docs/operations.md in the control plane (the charts' READMEs)."""
    cp = environment.CONTROL_PLANE
    steps = [Step("helm install clusterhealth-crds charts/clusterhealth-crds", OPERATIONS, cp)]
    for chart, readme in (("controlplane", "charts/controlplane/README.md"),
                          ("remedy", "charts/remedy/README.md"),
                          ("mci-provider", MCI_README)):
        extra = " --set global.imageRegistry=registry.example.org/clusterhealth" \
            if chart == "mci-provider" else ""
        steps += [
            Step(f"helm dependency build charts/{chart}", readme, cp),
            Step(f"helm install clusterhealth-{chart} charts/{chart} --kube-context "
                 f"clusterhealth --namespace {NAMESPACE} --create-namespace{extra}", readme, cp,
                 local=pull_never(chart),
                 drop=("global.imageRegistry=registry.example.org/clusterhealth",)),
        ]
    return steps


MCI_CREDENTIALS = "clusterhealth-mci-credentials"
"""Where the MCI provider reads its member credentials (its chart's default)."""


def mci_credentials_namespace_step() -> Step:
    """Step 5, once: the namespace of the MCI provider's member credentials (its README)."""
    return Step(f"kubectl --context karmada-apiserver create namespace {MCI_CREDENTIALS}",
                MCI_README, environment.CONTROL_PLANE)


def mci_member_steps(member: str) -> list[Step]:
    """Step 5 for a member (its README).

    The provider's read-only identity there; its token and the member's CA as the Secret
    named like the member in the control plane.
    """
    secret = (f"kubectl --context {member} -n {NAMESPACE} get secret "
              "clusterhealth-mci-provider-token -o jsonpath=")
    return [
        Step(f"helm install clusterhealth-mci-provider charts/mci-provider --kube-context "
             f"{member} --namespace {NAMESPACE} --create-namespace --set target=member "
             "--set crds.enabled=false", MCI_README, member),
        Step(secret + "'{.data.token}'", MCI_README, member, decode_to="token"),
        Step(secret + "'{.data.ca\\.crt}'", MCI_README, member, decode_to="ca.crt"),
        Step(f"kubectl --context karmada-apiserver -n {MCI_CREDENTIALS} create secret generic "
             f"{member} --from-file=token=token --from-file=caBundle=ca.crt", MCI_README,
             environment.CONTROL_PLANE),
    ]


def agent_identity_steps(member: str) -> list[Step]:
    """Step 6 in the control plane: the agent's ServiceAccount, RBAC and token (its README)."""
    cp = environment.CONTROL_PLANE
    return [
        Step(f"kubectl --context karmada -n karmada-cluster create serviceaccount "
             f"clusterhealth-agent-{member}", AGENT_README, cp),
        Step(f"helm install clusterhealth-agent-rbac-{member} charts/agent --kube-context "
             f"karmada --namespace karmada-cluster --set target=controlPlane --set "
             f"clusterName={member} --set controlPlane.subject.kind=ServiceAccount --set "
             f"controlPlane.subject.name=clusterhealth-agent-{member} --set "
             "controlPlane.subject.namespace=karmada-cluster", AGENT_README, cp),
        Step("kubectl --context karmada -n karmada-cluster apply -f -", AGENT_README, cp,
             stdin=AGENT_TOKEN_SECRET.format(member=member)),
    ]


def agent_token_step(member: str) -> Step:
    """The README's ``TOKEN=$(... | base64 -d)``: this command's output, base64-decoded."""
    return Step(f"kubectl --context karmada -n karmada-cluster get secret "
                f"clusterhealth-agent-{member}-token -o jsonpath='{{.data.token}}'",
                AGENT_README, environment.CONTROL_PLANE)


def agent_kubeconfig_steps(member: str) -> list[Step]:
    """Step 6: the kubeconfig of the agent's identity, written and checked (its README)."""
    cp = environment.CONTROL_PLANE
    file = f"agent-{member}.kubeconfig"
    return [
        Step(f"kubectl config --kubeconfig {file} set-cluster karmada "
             f"--server={CP_URL_PLACEHOLDER} --certificate-authority={CA_PLACEHOLDER} "
             "--embed-certs", AGENT_README, cp),
        Step(f'kubectl config --kubeconfig {file} set-credentials agent '
             f'--token="{TOKEN_PLACEHOLDER}"', AGENT_README, cp),
        Step(f"kubectl config --kubeconfig {file} set-context karmada --cluster=karmada "
             "--user=agent", AGENT_README, cp),
        Step(f"kubectl config --kubeconfig {file} use-context karmada", AGENT_README, cp),
        Step(f"kubectl --kubeconfig {file} get cluster {member}", AGENT_README, cp),
    ]


def agent_member_steps(member: str, settings: FleetSettings) -> list[Step]:
    """Step 6 in the member: the namespace, the kubeconfig Secret, the agent (its README)."""
    timers = tuple(w for value in settings.agent_values for w in ("--set", value))
    return [
        Step(f"kubectl --context {member} create namespace {NAMESPACE}", AGENT_README, member,
             exists_ok=True),
        Step(f"kubectl --context {member} -n {NAMESPACE} create secret generic "
             f"clusterhealth-agent-karmada-kubeconfig --from-file=kubeconfig=agent-{member}"
             ".kubeconfig", AGENT_README, member),
        Step(f"helm install clusterhealth-agent charts/agent --kube-context {member} "
             f"--namespace {NAMESPACE} --set clusterName={member}", AGENT_README, member,
             local=pull_never("agent") + timers),
    ]


def rollout_steps(members: Sequence[str], timeout: float) -> list[Step]:
    """The READMEs' checks: every workload rolled out (a timeout added)."""
    cp = environment.CONTROL_PLANE
    local = (f"--timeout={int(timeout)}s",)
    steps = [Step(f"kubectl -n {NAMESPACE} rollout status deployment/{name}",
                  readme, cp, local=local)
             for name, readme in (
                 ("clusterhealth-controlplane-controller-manager",
                  "charts/controlplane/README.md"),
                 ("clusterhealth-controlplane-scheduler", "charts/controlplane/README.md"),
                 ("clusterhealth-remedy", "charts/remedy/README.md"),
                 ("clusterhealth-mci-provider", MCI_README))]
    steps.append(Step(f"kubectl -n {NAMESPACE} rollout status "
                      "deployment/clusterhealth-controlplane-webhook",
                      "charts/controlplane/README.md", cp, local=local))
    steps += [Step(f"kubectl --context {member} -n {NAMESPACE} rollout status "
                   "daemonset/clusterhealth-agent", AGENT_README, member, local=local)
              for member in members]
    return steps


def install_steps(members: Sequence[str], settings: FleetSettings = FleetSettings()
                  ) -> list[Step]:
    """Every command of the install, in the order :meth:`Fleet.install` runs them."""
    cp_steps = control_plane_steps()
    steps = [*cp_steps[:5], mci_credentials_namespace_step()]
    for member in members:
        steps += mci_member_steps(member)
    steps += cp_steps[5:]  # the MCI chart reads its credentials' namespace: after them
    for member in members:
        steps += [*agent_identity_steps(member), agent_token_step(member),
                  *agent_kubeconfig_steps(member), *agent_member_steps(member, settings)]
    return steps + rollout_steps(members, settings.rollout_timeout)


def uninstall_steps(members: Sequence[str]) -> list[Step]:
    """docs/operations.md, "Uninstall": the users' objects first, then every release."""
    cp = environment.CONTROL_PLANE
    steps = [Step("kubectl delete multiclusteringresses --all --all-namespaces --wait",
                  OPERATIONS, cp),
             Step("kubectl delete remedies --all --wait", OPERATIONS, cp)]
    for member in members:
        steps += [Step(f"helm uninstall clusterhealth-agent --kube-context {member} "
                       f"--namespace {NAMESPACE}", OPERATIONS, member),
                  Step(f"helm uninstall clusterhealth-mci-provider --kube-context {member} "
                       f"--namespace {NAMESPACE}", OPERATIONS, member),
                  Step(f"helm uninstall clusterhealth-agent-rbac-{member} --kube-context "
                       "clusterhealth --namespace karmada-cluster", OPERATIONS, cp)]
    steps += [Step(f"helm uninstall {release} --kube-context clusterhealth --namespace "
                   f"{NAMESPACE}", OPERATIONS, cp)
              for release in ("clusterhealth-mci-provider", "clusterhealth-remedy",
                              "clusterhealth-controlplane")]
    steps.append(Step("helm uninstall clusterhealth-crds --kube-context clusterhealth",
                      OPERATIONS, cp))
    return steps


def merged_kubeconfig(env: environment.LocalEnvironment) -> dict[str, Any]:
    """One kubeconfig with a context per cluster, named as the docs name them."""
    clusters, users, contexts = [], [], []
    names = [(environment.CONTROL_PLANE, c) for c in CONTROL_PLANE_CONTEXTS]
    names += [(member, member) for member in env.members]
    seen: set[str] = set()
    for cluster, context in names:
        config = yaml.safe_load(env.kubeconfig(cluster).read_text())
        if cluster not in seen:
            seen.add(cluster)
            clusters += config["clusters"]
            users += config["users"]
        contexts.append({"name": context, "context": dict(config["contexts"][0]["context"])})
    return {"apiVersion": "v1", "kind": "Config", "clusters": clusters, "users": users,
            "contexts": contexts, "current-context": CONTROL_PLANE_CONTEXTS[0]}


@dataclasses.dataclass
class Ran:
    """A command that ran: its words, exit code, output and duration."""

    argv: list[str]
    code: int
    stdout: str
    stderr: str
    seconds: float


class Fleet:
    """The charts installed into an environment with Nodes (see the module docstring).

    ``env`` has Nodes in the control plane's cluster and in every member, and was
    started with ``EnvironmentConfig(crds=False)`` (the chart installs them).
    """

    def __init__(self, env: environment.LocalEnvironment, built: Mapping[str, images.Built],
                 workdir: pathlib.Path, settings: FleetSettings = FleetSettings()) -> None:
        self.env = env
        self.built = dict(built)
        self.workdir = workdir
        self.settings = settings
        self.helm_binary = binaries.ensure_helm()
        self.kubectl_binary = binaries.ensure_kubectl()
        self.kubeconfig = workdir / "kubeconfig"
        self.ran: list[Ran] = []
        self.timings: dict[str, float] = {}
        """Seconds per part of the install (images, each step, rollouts)."""
        self.tokens: dict[str, str] = {}
        self._prepared = False

    # --- running commands ---------------------------------------------------------

    def prepare(self) -> None:
        """The working folder: the merged kubeconfig, helm's homes, ``charts`` (a link)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig.write_text(yaml.safe_dump(merged_kubeconfig(self.env), sort_keys=False))
        self.kubeconfig.chmod(0o600)
        charts = self.workdir / "charts"
        if not charts.exists():
            charts.symlink_to(REPO / "charts")
        self._prepared = True

    def context(self, cluster: str) -> str:
        """The kubeconfig context of ``cluster``."""
        return CONTROL_PLANE_CONTEXTS[0] if cluster == environment.CONTROL_PLANE else cluster

    def process_env(self) -> dict[str, str]:
        """The environment of helm and kubectl: our kubeconfig, helm's folders in ours."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig),
                "HELM_CACHE_HOME": str(self.workdir / "helm" / "cache"),
                "HELM_CONFIG_HOME": str(self.workdir / "helm" / "config"),
                "HELM_DATA_HOME": str(self.workdir / "helm" / "data")}

    async def run(self, argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
                  timeout: float = 300.0) -> Ran:
        """Run ``helm ...`` or ``kubectl ...`` (our binaries) in the working folder."""
        if not self._prepared:
            self.prepare()
        program = {"helm": str(self.helm_binary), "kubectl": str(self.kubectl_binary)}
        words = [program.get(argv[0], argv[0]), *argv[1:]]
        began = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *words, cwd=self.workdir, env=self.process_env(),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(stdin.encode() if stdin is not None else None), timeout)
        except (TimeoutError, asyncio.CancelledError) as exc:  # no process left behind
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise FleetError(f"{shlex.join(argv)}: no answer in {timeout:.0f}s") from None
        assert proc.returncode is not None
        ran = Ran(list(argv), proc.returncode, out.decode(errors="replace"),
                  err.decode(errors="replace"), time.monotonic() - began)
        self.ran.append(ran)
        if check and ran.code != 0:
            raise FleetError(f"{shlex.join(argv)} failed ({ran.code}):\n"
                             f"{ran.stderr[-3000:]}{ran.stdout[-2000:]}")
        return ran

    async def helm(self, cluster: str, *args: str, check: bool = True) -> Ran:
        """``helm --kube-context <cluster> args``."""
        return await self.run(["helm", "--kube-context", self.context(cluster), *args],
                              check=check)

    async def kubectl(self, cluster: str, *args: str, stdin: str | None = None,
                      check: bool = True, timeout: float = 300.0) -> Ran:
        """``kubectl --context <cluster> args``."""
        return await self.run(["kubectl", "--context", self.context(cluster), *args],
                              stdin=stdin, check=check, timeout=timeout)

    def substitutions(self) -> dict[str, str]:
        """The docs' placeholders and what they are here."""
        cp = self.env.servers[environment.CONTROL_PLANE]
        return {CP_URL_PLACEHOLDER: cp.url, CA_PLACEHOLDER: str(self.env.workdir / "ca.crt"),
                TOKEN_PLACEHOLDER: self.tokens.get("current", TOKEN_PLACEHOLDER)}

    async def step(self, step: Step) -> Ran:
        """Run one documented command (its ``| base64 -d > file`` done here)."""
        deadline = time.monotonic() + 30
        while True:
            ran = await self.run(step.argv(self.substitutions()), stdin=step.stdin,
                                 timeout=self.settings.rollout_timeout + 60,
                                 check=not step.exists_ok)
            if step.exists_ok and ran.code != 0 and "(AlreadyExists)" not in ran.stderr:
                raise FleetError(f"{step.text} failed ({ran.code}):\n{ran.stderr[-3000:]}")
            if step.decode_to is None:
                return ran
            if ran.stdout.strip():
                (self.workdir / step.decode_to).write_bytes(
                    base64.b64decode(ran.stdout.strip()))
                return ran
            if time.monotonic() > deadline:
                raise FleetError(f"{step.text}: nothing to decode after 30 s (is the token "
                                 "controller running?)")
            await asyncio.sleep(0.2)

    # --- the install --------------------------------------------------------------

    async def load_images(self) -> None:
        """The clusterhealth image into every Node; HAProxy's into the control plane's."""
        began = time.monotonic()
        work = []
        for name in [environment.CONTROL_PLANE, *self.env.members]:
            cluster = self.env.node_cluster(name)
            work.append(cluster.load_image(self.built["clusterhealth"].archive))
        work.append(self.env.node_cluster(environment.CONTROL_PLANE).load_image(
            self.built["clusterhealth-haproxy"].archive))
        await asyncio.gather(*work)
        self.timings["load images"] = time.monotonic() - began

    async def _timed(self, what: str, steps: Sequence[Step]) -> None:
        began = time.monotonic()
        for step in steps:
            await self.step(step)
        self.timings[what] = self.timings.get(what, 0.0) + time.monotonic() - began

    async def install(self) -> None:
        """docs/operations.md, steps 1 to 6, then every rollout (see the module docstring)."""
        members = self.env.members
        cp_steps = control_plane_steps()
        await self._timed("1 CRDs", cp_steps[:1])
        began = time.monotonic()
        await self.env.register_members(mci_credentials=False)  # step 5 makes them
        self.timings["2 register the members"] = time.monotonic() - began
        await self._timed("3 control plane", cp_steps[1:3])
        await self._timed("4 remedy controller", cp_steps[3:5])
        await self._timed("5 MCI provider", [mci_credentials_namespace_step()])
        for member in members:
            await self._timed("5 MCI provider", mci_member_steps(member))
        await self._timed("5 MCI provider", cp_steps[5:7])
        for member in members:
            await self._timed("6 agents", agent_identity_steps(member))
            token = await self._token(member)
            self.tokens[member] = token
            self.tokens["current"] = token
            await self._timed("6 agents", agent_kubeconfig_steps(member))
            await self._timed("6 agents", agent_member_steps(member, self.settings))
        self.tokens.pop("current", None)
        await self._timed("rollouts", rollout_steps(members, self.settings.rollout_timeout))

    async def _token(self, member: str) -> str:
        """The README's ``TOKEN=$(...)``, once the token controller filled the Secret."""
        deadline = time.monotonic() + 30
        while True:
            ran = await self.step(agent_token_step(member))
            if ran.stdout.strip():
                return base64.b64decode(ran.stdout.strip()).decode()
            if time.monotonic() > deadline:
                raise FleetError(f"the token of clusterhealth-agent-{member} never appeared")
            await asyncio.sleep(0.2)

    async def notes(self, release: str, cluster: str, namespace: str | None) -> str:
        """What ``helm install`` printed after NOTES: (``helm get notes``)."""
        args = ["get", "notes", release] + (["--namespace", namespace] if namespace else [])
        return (await self.helm(cluster, *args)).stdout

    # --- the application the stories use -----------------------------------------

    async def deploy_shop(self, tmp: pathlib.Path, replicas: int = 2) -> None:
        """A web application in every member behind Service ``shop/web``, and its MCI.

        Busybox ``httpd`` Pods answering ``WEB_PATH`` with their cluster and name (header
        ``X-Backend``; ``?delay=<s>`` answers late), an MCI ``shop/web`` in the control
        plane for ``WEB_HOST``, and the Remedy ``dns-down`` (DNS False -> TrafficControl).
        """
        image = await asyncio.to_thread(folderimages.busybox_image, tmp / "busybox.tar",
                                        BUSYBOX)
        await asyncio.gather(*(self.env.node_cluster(m).load_image(image.archive)
                               for m in self.env.members))
        for member in self.env.members:
            async with self.env.client(member) as api:
                await _create(api, resources.NAMESPACES, {"metadata": {"name": SHOP}})
                await _create(api, resources.DEPLOYMENTS, web_deployment(member, replicas),
                              SHOP)
                await _create(api, resources.SERVICES, web_service(), SHOP)
        async with self.env.client() as api:
            await _create(api, resources.NAMESPACES, {"metadata": {"name": SHOP}})
            await _create(api, resources.MULTI_CLUSTER_INGRESSES, web_mci(), SHOP)
            await _create(api, resources.REMEDIES, dns_remedy())

    async def haproxy_pods(self) -> list[dict[str, Any]]:
        """The MCI provider's Pods (each runs HAProxy), Ready ones first.

        A Pod being deleted is left out: it may still show Ready while its
        containers are already gone (a test before deleted it).
        """
        async with self.env.client() as api:
            pods = (await api.list(resources.PODS, namespace=NAMESPACE,
                                   label_selector="app.kubernetes.io/name="
                                                  "clusterhealth-mci-provider"))["items"]
        live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
        return sorted(live, key=lambda p: not pod_ready(p))


@contextlib.asynccontextmanager
async def running(workdir: pathlib.Path, members: Sequence[str] = ("member1", "member2"),
                  before_install: Callable[[Fleet], Awaitable[None]] | None = None
                  ) -> AsyncIterator[Fleet]:
    """The whole fleet from nothing, torn down on exit.

    The images (built or cached), an environment whose control plane has one Node and
    every member two, the images loaded, every chart installed (:meth:`Fleet.install`)
    and the ``shop`` application (:meth:`Fleet.deploy_shop`).

    ``before_install`` runs once the clusters are up and before the first chart (the
    tests record every object there).  ``Fleet.timings`` says where the time went.
    """
    began = time.monotonic()
    built = await asyncio.to_thread(images.ensure_images)
    built_at = time.monotonic()
    config = environment.EnvironmentConfig(
        members=tuple(members), crds=False,
        nodes=nodes.NodeSettings(nodes=2, control_plane_nodes=1))
    async with environment.LocalEnvironment(config) as env:
        the_fleet = Fleet(env, built, workdir / "install")
        the_fleet.timings["images (build or cache)"] = built_at - began
        the_fleet.timings["environment start"] = time.monotonic() - built_at
        await the_fleet.load_images()
        if before_install is not None:
            await before_install(the_fleet)
        await the_fleet.install()
        shop = time.monotonic()
        await the_fleet.deploy_shop(workdir)
        the_fleet.timings["shop (web, MCI, Remedy)"] = time.monotonic() - shop
        yield the_fleet


async def _create(api: kube.ApiClient, resource: resources.Resource, body: dict[str, Any],
                  namespace: str | None = None) -> None:
    with contextlib.suppress(errors.Conflict):
        await api.create(resource, body, namespace=namespace)


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """Whether a Pod's Ready condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


WEB_SCRIPT = r"""#!/bin/sh
case "$QUERY_STRING" in *delay=*) sleep "${QUERY_STRING#*delay=}";; esac
body="$CLUSTER/$POD_NAME"
head='Content-Type: text/plain\r\nX-Backend: %s\r\nContent-Length: %s\r\n'
printf "${head}Connection: close\r\n\r\n%s\n" "$body" "$((${#body} + 1))" "$body"
"""


def web_deployment(member: str, replicas: int) -> dict[str, Any]:
    """Busybox httpd Pods answering ``WEB_PATH`` as ``<member>/<pod>`` (a CGI script).

    httpd closes every connection after its answer, so the answer says so
    (``Connection: close``): HAProxy would otherwise keep the connection for the next
    request, find it closed, and close the client's connection without an answer.
    """
    script = WEB_SCRIPT.replace("'", "'\"'\"'")
    start = (f"mkdir -p /www/cgi-bin && printf '%s' '{script}' > /www/cgi-bin/web && "
             f"chmod +x /www/cgi-bin/web && exec httpd -f -p {WEB_PORT} -h /www")
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": SHOP},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{
                        "name": "httpd", "image": BUSYBOX, "imagePullPolicy": "Never",
                        "command": ["sh", "-c", start],
                        "env": [{"name": "CLUSTER", "value": member},
                                {"name": "POD_NAME",
                                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "ports": [{"name": "http", "containerPort": WEB_PORT}],
                        "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 2},
                    }],
                },
            },
        },
    }


def web_service() -> dict[str, Any]:
    """Service ``shop/web``: port 80 -> the Pods' ``http``."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": SHOP},
            "spec": {"selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}


def web_mci() -> dict[str, Any]:
    """The MCI in front of Service ``web`` (docs/mci.md's shape)."""
    return {"apiVersion": resources.MULTI_CLUSTER_INGRESSES.api_version,
            "kind": "MultiClusterIngress", "metadata": {"name": "web", "namespace": SHOP},
            "spec": {"ingressClassName": "clusterhealth", "rules": [{
                "host": WEB_HOST, "http": {"paths": [{
                    "path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}


def dns_remedy() -> dict[str, Any]:
    """docs/remedy.md's first example: DNS False -> TrafficControl, on every cluster."""
    return {"apiVersion": resources.REMEDIES.api_version, "kind": "Remedy",
            "metadata": {"name": "dns-down"},
            "spec": {"decisionMatches": [{"clusterConditionMatch": {
                "conditionType": DNS_CONDITION, "operator": "Equal",
                "conditionStatus": "False"}}],
                "actions": ["TrafficControl"]}}
