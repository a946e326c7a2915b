"""``clusterhealth join`` and ``unjoin``: register a member with its identities, or remove it.

The objects come from :mod:`clusterhealth_cli.joinplan`; this module talks to
the two API servers.  Every write is a server-side apply as
:data:`~clusterhealth_cli.joinplan.FIELD_MANAGER` after a read, so a second run
changes nothing and says ``unchanged``; ``--dry-run`` does the reads and says
what it would create or configure, and writes nothing.  Messages follow
``karmadactl join``'s (``cluster(member1) is joined successfully``) and
kubectl's (``serviceaccount/karmada-cluster/karmada-member1 created``).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TextIO

from clusterhealth_cli import errors, joinplan
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors as kube_errors
from clusterhealth_core.kube import resources

Sleep = Callable[[float], Awaitable[None]]
POLL = 0.5
"""How often a token Secret or a deleted Cluster is looked at again."""
AGENT_RELEASE = "clusterhealth-agent"
MCI_RELEASE = joinplan.MCI_ACCOUNT
"""Named like the chart, so that its ServiceAccount is ``clusterhealth-mci-provider``."""


@dataclasses.dataclass(frozen=True)
class Helm:
    """How to run helm against the member (its kubeconfig as join was given it)."""

    binary: str
    kubeconfig: str | None
    context: str | None
    agent_chart: str | None = None
    agent_values: tuple[str, ...] = ()
    mci_chart: str | None = None


@dataclasses.dataclass(frozen=True)
class JoinRequest:
    """Everything ``join`` was asked to do."""

    name: str
    plane: joinplan.ControlPlane
    options: joinplan.Options
    helm: Helm
    dry_run: bool = False
    wait: float = 60.0
    """How long a token Secret may take to be filled (the token controller)."""
    token_duration: float | None = None
    """Ask the TokenRequest API for tokens of this lifetime instead of long-lived Secrets."""


class Report:
    """The lines the user sees: one per object, kubectl's words, ``(dry run)`` when so."""

    def __init__(self, out: TextIO, dry_run: bool) -> None:
        self.out = out
        self.suffix = " (dry run)" if dry_run else ""

    def section(self, text: str) -> None:
        """A heading: which API server the next lines are about."""
        self.out.write(f"{text}\n")

    def line(self, what: str, outcome: str) -> None:
        """``  what outcome``."""
        self.out.write(f"  {what} {outcome}{self.suffix}\n")


def _api_error(where: str, exc: kube_errors.KubeError) -> errors.CliError:
    if isinstance(exc, kube_errors.Unreachable):
        return errors.CliError(f"cannot reach {where}: {exc}", errors.API)
    if isinstance(exc, kube_errors.Unauthorized):
        return errors.CliError(f"{where} refused the credentials: {exc}", errors.API)
    if isinstance(exc, kube_errors.Forbidden):
        return errors.CliError(f"{where} forbids it: {exc} (join needs rights to make "
                               "ServiceAccounts, Secrets and RBAC there)", errors.API)
    return errors.CliError(f"{where} answered with an error: {exc}", errors.API)


class Side:
    """One API server (the member or the control plane) and the objects written there."""

    def __init__(self, api: kube.ApiClient, label: str, report: Report, dry_run: bool) -> None:
        self.api = api
        self.label = label
        self.report = report
        self.dry_run = dry_run

    async def read(self, resource: resources.Resource, name: str,
                   namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return await self.api.get(resource, name, namespace=namespace)
        except kube_errors.NotFound:
            return None
        except kube_errors.KubeError as exc:
            raise _api_error(self.label, exc) from None

    async def apply(self, resource: resources.Resource, manifest: Mapping[str, Any], *,
                    quiet: bool = False) -> dict[str, Any] | None:
        """Create or configure ``manifest`` unless it already says so; report the outcome."""
        meta = manifest["metadata"]
        live = await self.read(resource, meta["name"], meta.get("namespace"))
        if live is not None and not joinplan.differs(manifest, live):
            if not quiet:
                self.report.line(joinplan.describe(resource, manifest), "unchanged")
            return live
        outcome = "created" if live is None else "configured"
        if not quiet:
            self.report.line(joinplan.describe(resource, manifest), outcome)
        if self.dry_run:
            return live
        try:
            return await self.api.apply(resource, manifest, field_manager=joinplan.FIELD_MANAGER)
        except kube_errors.KubeError as exc:
            raise _api_error(self.label, exc) from None

    async def delete(self, resource: resources.Resource, name: str,
                     namespace: str | None = None) -> None:
        """Delete what a join made (labelled so); keep and say so what someone else made."""
        live = await self.read(resource, name, namespace)
        what = joinplan.describe(resource, {"metadata": {"name": name, "namespace": namespace}})
        if live is None:
            return
        labels = (live.get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in joinplan.MANAGED_BY.items()):
            self.report.line(what, "kept (not made by clusterhealth join)")
            return
        self.report.line(what, "deleted")
        if self.dry_run:
            return
        try:
            await self.api.delete(resource, name, namespace=namespace, missing_ok=True)
        except kube_errors.KubeError as exc:
            raise _api_error(self.label, exc) from None

    async def token(self, account: str, namespace: str, request: JoinRequest,
                    sleep: Sleep, owner: Mapping[str, Any] | None = None) -> str | None:
        """A token of ``account``: from its long-lived Secret, or the TokenRequest API.

        None only in a dry run, for an identity that does not exist yet.
        """
        if request.token_duration is not None:
            if self.dry_run:
                return None
            body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"expirationSeconds": int(request.token_duration)}}
            try:
                issued = await self.api.request(
                    "POST", resources.SERVICE_ACCOUNTS.path(account, namespace=namespace,
                                                           subresource="token"), body=body)
            except kube_errors.KubeError as exc:
                raise _api_error(self.label, exc) from None
            return str(issued["status"]["token"])
        secret = joinplan.account_token(account, namespace, owner)
        await self.apply(resources.SECRETS, secret)
        return await self.filled_token(secret["metadata"]["name"], namespace, request, sleep)

    async def filled_token(self, name: str, namespace: str, request: JoinRequest,
                           sleep: Sleep) -> str | None:
        """The token in the Secret ``name``, once the token controller filled it.

        None only in a dry run, before the Secret exists.
        """
        deadline = time.monotonic() + request.wait
        while True:
            live = await self.read(resources.SECRETS, name, namespace)
            token = ((live or {}).get("data") or {}).get("token")
            if token:
                return base64.b64decode(token).decode()
            if self.dry_run:
                return None
            if time.monotonic() >= deadline:
                raise errors.CliError(
                    f"{self.label}: Secret {namespace}/{name} got no token in "
                    f"{request.wait:g}s: the API server's token controller (in "
                    "kube-controller-manager) fills it; is it running? Or give "
                    "--token-duration to ask the TokenRequest API for an expiring token",
                    errors.API)
            await sleep(POLL)


# --- join ---------------------------------------------------------------------------------

async def member_facts(api: kube.ApiClient, name: str) -> joinplan.Member:
    """The member's endpoint, CA, proxy (from its kubeconfig) and ID (kube-system's UID)."""
    creds = api.credentials
    try:
        system = await api.get(resources.NAMESPACES, "kube-system")
    except kube_errors.KubeError as exc:
        raise _api_error(f"the member cluster {creds.server}", exc) from None
    if creds.tls_server_name:
        raise errors.CliError(
            f"the member's kubeconfig sets tls-server-name {creds.tls_server_name!r}, which a "
            "Cluster cannot hold: use a server address its certificate names", errors.USAGE)
    return joinplan.Member(name=name, server=creds.server,
                           cluster_id=str(system["metadata"]["uid"]), ca=creds.ca_data,
                           insecure=creds.insecure_skip_tls_verify, proxy_url=creds.proxy_url)


async def check_identity(cp: Side, member: joinplan.Member) -> None:
    """Refuse a member registered under another name, or a name taken by another cluster."""
    try:
        listed = await cp.api.list(resources.CLUSTERS)
    except kube_errors.NotFound:
        raise errors.CliError(f"{cp.label} does not serve {resources.CLUSTERS.api_version} "
                              "Clusters: install the clusterhealth-crds chart first (or point "
                              "--kubeconfig at Karmada)", errors.API) from None
    except kube_errors.KubeError as exc:
        raise _api_error(cp.label, exc) from None
    for item in listed.get("items") or []:
        name = item["metadata"]["name"]
        spec = item.get("spec") or {}
        if name != member.name and spec.get("id") == member.cluster_id:
            raise errors.CliError(f"the same cluster has been registered with name {name} "
                                  f"(id {member.cluster_id})", errors.CONFLICT)
        if name == member.name:
            other_id = spec.get("id")
            if other_id and other_id != member.cluster_id:
                raise errors.CliError(
                    f"Cluster {name} already exists for another cluster (id {other_id}, "
                    f"{spec.get('apiEndpoint')}); unjoin it first or pick another name",
                    errors.CONFLICT)
            if not other_id and spec.get("apiEndpoint") not in (None, member.server):
                raise errors.CliError(
                    f"Cluster {name} already exists for {spec.get('apiEndpoint')}; unjoin it "
                    "first or pick another name", errors.CONFLICT)


def run_helm(argv: Sequence[str], dry_run: bool, report: Report) -> None:
    """Run helm (or, in a dry run, say what would run)."""
    shown = " ".join(argv)
    if dry_run:
        report.line(f"helm: {shown}", "would run")
        return
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    except OSError as exc:
        raise errors.CliError(f"cannot run helm ({argv[0]}): {exc}; give --helm PATH",
                              errors.API) from None
    if proc.returncode != 0:
        tail = " ".join((proc.stderr or proc.stdout).split())[-600:]
        raise errors.CliError(f"helm failed ({shown}): {tail}", errors.API)
    report.line(f"helm release {argv[3]} ({argv[4]})", "installed or upgraded")


async def join(request: JoinRequest, cp_api: kube.ApiClient, member_api: kube.ApiClient,
               out: TextIO, sleep: Sleep = asyncio.sleep) -> None:
    """Register the member ``request.name`` with everything it needs; idempotent."""
    report = Report(out, request.dry_run)
    name = request.name
    cp = Side(cp_api, f"the control plane {cp_api.credentials.server}", report,
              request.dry_run)
    mem = Side(member_api, f"the member cluster {member_api.credentials.server}", report,
               request.dry_run)
    member = await member_facts(member_api, name)
    await check_identity(cp, member)
    ns = joinplan.CLUSTER_NAMESPACE
    options = request.options

    report.section(f"member cluster {member.server} (id {member.cluster_id}):")
    await mem.apply(resources.NAMESPACES, joinplan.namespace(ns))
    account = joinplan.member_account(name)
    await mem.apply(resources.SERVICE_ACCOUNTS, joinplan.service_account(account, ns))
    role = joinplan.member_role(name)
    await mem.apply(joinplan.CLUSTER_ROLES, joinplan.cluster_role(
        role, joinplan.member_rules(options.access, options.kinds)))
    await mem.apply(joinplan.CLUSTER_ROLE_BINDINGS,
                    joinplan.cluster_role_binding(role, account, ns))
    member_token = await mem.token(account, ns, request, sleep)

    report.section(f"control plane {cp_api.credentials.server}:")
    await cp.apply(resources.NAMESPACES, joinplan.namespace(ns))
    secret = joinplan.cluster_secret(member, member_token or "")
    if member_token is None:
        secret.pop("data")  # a dry run before the identity exists: its token is unknown
    await cp.apply(resources.SECRETS, secret)
    cluster_obj = await cp.apply(resources.CLUSTERS, joinplan.cluster(member, options))
    owner = (joinplan.owner_reference(cluster_obj)
             if cluster_obj is not None and "uid" in cluster_obj["metadata"] else None)
    if owner is not None and member_token is not None:
        # As Karmada's join: the Secret belongs to the Cluster (deleted with it).
        await cp.apply(resources.SECRETS, joinplan.cluster_secret(member, member_token, owner),
                       quiet=True)
    agent = joinplan.agent_account(name)
    await cp.apply(resources.SERVICE_ACCOUNTS, joinplan.service_account(agent, ns, owner))
    agent_role = joinplan.agent_role(name)
    await cp.apply(joinplan.CLUSTER_ROLES,
                   joinplan.cluster_role(agent_role, joinplan.agent_rules(name), owner))
    await cp.apply(joinplan.CLUSTER_ROLE_BINDINGS,
                   joinplan.cluster_role_binding(agent_role, agent, ns, owner))
    agent_token = await cp.token(agent, ns, request, sleep, owner)

    report.section(f"member cluster {member.server}, the agent's credentials:")
    agent_ns = options.agent_namespace
    await mem.apply(resources.NAMESPACES, joinplan.namespace(agent_ns))
    kubeconfig_secret = joinplan.agent_kubeconfig_secret(request.plane, agent_token or "",
                                                         name, agent_ns)
    if agent_token is None:
        kubeconfig_secret.pop("data")
    await mem.apply(resources.SECRETS, kubeconfig_secret)

    helm = request.helm
    if helm.agent_chart:
        run_helm(joinplan.helm_command(helm.binary, AGENT_RELEASE, helm.agent_chart, agent_ns,
                                       helm.kubeconfig, helm.context, joinplan.agent_sets(name),
                                       helm.agent_values), request.dry_run, report)
    if helm.mci_chart:
        run_helm(joinplan.helm_command(helm.binary, MCI_RELEASE, helm.mci_chart, agent_ns,
                                       helm.kubeconfig, helm.context,
                                       joinplan.mci_member_sets()), request.dry_run, report)
        # the provider reads this member with that identity: its token, into the control plane
        mci_token = await mem.filled_token(joinplan.token_secret(joinplan.MCI_ACCOUNT),
                                           agent_ns, request, sleep)
        report.section(f"control plane {cp_api.credentials.server}, the MCI provider's "
                       "read-only member credential:")
        await cp.apply(resources.NAMESPACES, joinplan.namespace(joinplan.MCI_CREDENTIALS_NAMESPACE))
        credential = joinplan.mci_credentials(member, mci_token or "")
        if mci_token is None:
            credential.pop("data")
        await cp.apply(resources.SECRETS, credential)
    if request.dry_run:
        out.write(f"cluster({name}) would be joined (dry run: nothing was changed)\n")
        return
    out.write(f"cluster({name}) is joined successfully\n")
    if not helm.agent_chart:
        command = joinplan.helm_command("helm", AGENT_RELEASE, "<agent chart>", agent_ns,
                                        helm.kubeconfig, helm.context,
                                        joinplan.agent_sets(name))
        out.write("next: install the agent in the member (its kubeconfig Secret is there):\n"
                  f"  {' '.join(command)}\n")


# --- unjoin ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class UnjoinRequest:
    """Everything ``unjoin`` was asked to do."""

    name: str
    agent_namespace: str = joinplan.AGENT_NAMESPACE
    helm: Helm | None = None
    dry_run: bool = False
    wait: float = 60.0


async def unjoin(request: UnjoinRequest, cp_api: kube.ApiClient,
                 member_api: kube.ApiClient | None, out: TextIO,
                 sleep: Sleep = asyncio.sleep) -> None:
    """Delete the Cluster and what a join made for it (in the member too, given its kubeconfig)."""
    report = Report(out, request.dry_run)
    name = request.name
    ns = joinplan.CLUSTER_NAMESPACE
    cp = Side(cp_api, f"the control plane {cp_api.credentials.server}", report,
              request.dry_run)
    live = await cp.read(resources.CLUSTERS, name)
    if live is None:
        raise errors.CliError(f"no Cluster named {name!r} on {cp_api.credentials.server} "
                              "(list them with kubectl get clusters)", errors.NOT_FOUND)
    report.section(f"control plane {cp_api.credentials.server}:")
    report.line(joinplan.describe(resources.CLUSTERS, live), "deleted")
    if not request.dry_run:
        try:
            await cp_api.delete(resources.CLUSTERS, name, missing_ok=True)
        except kube_errors.KubeError as exc:
            raise _api_error(cp.label, exc) from None
        deadline = time.monotonic() + request.wait
        while await cp.read(resources.CLUSTERS, name) is not None:
            if time.monotonic() >= deadline:
                raise errors.CliError(f"Cluster {name} is still there after {request.wait:g}s "
                                      "(a finalizer holds it: see its metadata.finalizers)",
                                      errors.API)
            await sleep(POLL)
    agent = joinplan.agent_account(name)
    await cp.delete(resources.SECRETS, name, ns)
    await cp.delete(joinplan.CLUSTER_ROLE_BINDINGS, joinplan.agent_role(name))
    await cp.delete(joinplan.CLUSTER_ROLES, joinplan.agent_role(name))
    await cp.delete(resources.SECRETS, joinplan.token_secret(agent), ns)
    await cp.delete(resources.SERVICE_ACCOUNTS, agent, ns)
    await cp.delete(resources.SECRETS, name, joinplan.MCI_CREDENTIALS_NAMESPACE)
    if member_api is not None:
        mem = Side(member_api, f"the member cluster {member_api.credentials.server}", report,
                   request.dry_run)
        report.section(f"member cluster {member_api.credentials.server}:")
        helm = request.helm
        if helm is not None:
            for release in (AGENT_RELEASE, MCI_RELEASE):
                uninstall_release(helm, release, request.agent_namespace, request.dry_run,
                                  report)
        await mem.delete(resources.SECRETS, joinplan.AGENT_SECRET, request.agent_namespace)
        account = joinplan.member_account(name)
        role = joinplan.member_role(name)
        await mem.delete(joinplan.CLUSTER_ROLE_BINDINGS, role)
        await mem.delete(joinplan.CLUSTER_ROLES, role)
        await mem.delete(resources.SECRETS, joinplan.token_secret(account), ns)
        await mem.delete(resources.SERVICE_ACCOUNTS, account, ns)
        await mem.delete(resources.NAMESPACES, ns)
    if request.dry_run:
        out.write(f"cluster({name}) would be unjoined (dry run: nothing was changed)\n")
        return
    out.write(f"cluster({name}) is unjoined successfully\n")


def uninstall_release(helm: Helm, release: str, namespace: str, dry_run: bool,
                      report: Report) -> None:
    """``helm uninstall`` a release join installed, when it is there."""
    base = [helm.binary]
    if helm.kubeconfig:
        base += ["--kubeconfig", helm.kubeconfig]
    if helm.context:
        base += ["--kube-context", helm.context]
    try:
        status = subprocess.run([*base, "status", release, "--namespace", namespace],
                                capture_output=True, text=True, check=False)
    except OSError as exc:
        raise errors.CliError(f"cannot run helm ({helm.binary}): {exc}; give --helm PATH",
                              errors.API) from None
    if status.returncode != 0:
        return  # not installed here
    report.line(f"helm release {release}", "uninstalled")
    if dry_run:
        return
    proc = subprocess.run([*base, "uninstall", release, "--namespace", namespace],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = " ".join((proc.stderr or proc.stdout).split())[-600:]
        raise errors.CliError(f"helm uninstall {release} failed: {tail}", errors.API)
