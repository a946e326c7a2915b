"""What ``clusterhealth join`` creates, as plain manifests: pure, so it is tested with tables.

Joining a member means two identities and where their credentials go
(docs/operations.md, "Credentials each component needs"):

* **the member identity**, in the member: ServiceAccount ``karmada-<name>`` in
  ``karmada-cluster``, bound by the ClusterRole
  ``karmada-controller-manager:karmada-<name>`` (Karmada's names, so
  ``karmadactl unjoin`` finds them too), its token in a Secret; in the
  control plane the Secret ``karmada-cluster/<name>`` (Karmada's shape:
  ``caBundle`` and ``token``) and the ``Cluster`` pointing at it.  Its rights:
  ``scoped`` (the default) is what the controllers do there -- probe and
  discover the API server, read Nodes and Pods, make namespaces, and apply,
  read and delete the workload kinds they propagate; ``full`` is what
  ``karmadactl join`` grants (every verb on everything);
* **the agent's identity**, in the control plane: ServiceAccount
  ``clusterhealth-agent-<name>`` in ``karmada-cluster``, the ClusterRole and
  binding ``clusterhealth-agent:<name>`` exactly as the agent chart renders
  them with ``target=controlPlane`` (read its own Cluster, write its status),
  its token in a Secret, and a kubeconfig with that token in the member
  (Secret ``clusterhealth-agent-karmada-kubeconfig`` of the agent's
  namespace, what the agent chart mounts).

Every object carries :data:`MANAGED_BY`, so ``unjoin`` deletes only what a
join made.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from clusterhealth_core.kube import resources

Manifest = dict[str, Any]
RBAC = "rbac.authorization.k8s.io"
CLUSTER_ROLES = resources.Resource(RBAC, "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = resources.Resource(RBAC, "v1", "clusterrolebindings",
                                           "ClusterRoleBinding", namespaced=False)
CLUSTER_NAMESPACE = "karmada-cluster"
"""Where the member's credentials live, in the control plane and in the member (Karmada's)."""
AGENT_NAMESPACE = "clusterhealth-system"
AGENT_SECRET = "clusterhealth-agent-karmada-kubeconfig"
"""The agent chart's ``karmadaKubeconfig.secretName`` default (key ``kubeconfig``)."""
AGENT_SECRET_KEY = "kubeconfig"
FIELD_MANAGER = "clusterhealth-join"
MANAGED_BY = {"app.kubernetes.io/managed-by": "clusterhealth-join"}
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
ACCESS_MODES = ("scoped", "full")
DEFAULT_KINDS = ("apps/deployments", "apps/statefulsets", "apps/replicasets",
                 "services", "configmaps", "serviceaccounts")
"""The workload kinds the member identity may apply: the controlplane chart's default
``templateKinds``; ``--member-kinds`` gives others."""
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_NAME = 48
"""Karmada's limit for a cluster name (a DNS label, at most 48 characters)."""
_KIND = re.compile(r"^(?:([a-z0-9.-]+)/)?([a-z0-9]+)$")
WRITE_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")
READ_VERBS = ("get", "list", "watch")


@dataclasses.dataclass(frozen=True)
class Member:
    """What join needs to know of the member (from its kubeconfig and its API server)."""

    name: str
    server: str
    cluster_id: str
    """The UID of the member's ``kube-system`` namespace (Karmada's cluster ID)."""
    ca: bytes | None
    insecure: bool = False
    proxy_url: str | None = None


@dataclasses.dataclass(frozen=True)
class ControlPlane:
    """Where the agent reaches the control plane from (the kubeconfig written for it)."""

    server: str
    ca: bytes | None
    insecure: bool = False


@dataclasses.dataclass(frozen=True)
class Options:
    """The choices of ``clusterhealth join`` (flags, validated)."""

    access: str = "scoped"
    kinds: tuple[str, ...] = DEFAULT_KINDS
    provider: str | None = None
    region: str | None = None
    agent_namespace: str = AGENT_NAMESPACE


def check_name(name: str) -> str | None:
    """Why ``name`` cannot name a Cluster, or None (Karmada's rule: a DNS label, <= 48)."""
    if len(name) > MAX_NAME or not _NAME.match(name):
        return (f"invalid cluster name {name!r}: a DNS label (lower-case letters, digits and "
                f"'-', starting and ending with a letter or digit), at most {MAX_NAME} "
                "characters, as Karmada requires")
    return None


def parse_kinds(text: str) -> tuple[str, ...]:
    """``--member-kinds``: ``GROUP/RESOURCE`` or ``RESOURCE`` (core group), comma-separated."""
    kinds = tuple(part.strip() for part in text.split(",") if part.strip())
    if not kinds:
        raise ValueError("give at least one kind, e.g. apps/deployments,services")
    for kind in kinds:
        if not _KIND.match(kind):
            raise ValueError(f"{kind!r} is not GROUP/RESOURCE or RESOURCE (plural, lower "
                             "case: apps/deployments, services)")
    return kinds


# --- names --------------------------------------------------------------------------------

def member_account(name: str) -> str:
    """The member identity's ServiceAccount (Karmada's ``karmada-<cluster>``)."""
    return f"karmada-{name}"


def member_role(name: str) -> str:
    """Its ClusterRole and ClusterRoleBinding (Karmada's ``karmada-controller-manager:...``)."""
    return f"karmada-controller-manager:{member_account(name)}"


def agent_account(name: str) -> str:
    """The agent's ServiceAccount in the control plane (as charts/agent/README.md names it)."""
    return f"clusterhealth-agent-{name}"


def agent_role(name: str) -> str:
    """The agent's ClusterRole and binding (the agent chart's ``target=controlPlane`` names)."""
    return f"clusterhealth-agent:{name}"


MCI_ACCOUNT = "clusterhealth-mci-provider"
"""The MCI provider's read-only identity in a member: the chart's ServiceAccount when its
release is named like the chart (``clusterhealth-mci-provider``), as join installs it."""
MCI_CREDENTIALS_NAMESPACE = "clusterhealth-mci-credentials"
"""Where the MCI provider reads each member's read-only credential (its chart's default
``memberCredentials.namespace``)."""


def token_secret(account: str) -> str:
    """The Secret holding a ServiceAccount's long-lived token."""
    return f"{account}-token"


# --- rules ----------------------------------------------------------------------------------

def member_rules(access: str, kinds: Sequence[str]) -> list[Manifest]:
    """The member identity's rights: ``scoped`` what the controllers do, ``full`` Karmada's."""
    if access == "full":
        return [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["get"]}]
    by_group: dict[str, list[str]] = {}
    for kind in kinds:
        match = _KIND.match(kind)
        assert match is not None  # parse_kinds checked it
        by_group.setdefault(match.group(1) or "", []).append(match.group(2))
    rules: list[Manifest] = [
        # the cluster-status controller: health, version and discovery
        {"nonResourceURLs": ["/readyz", "/healthz", "/livez", "/version", "/api", "/api/*",
                             "/apis", "/apis/*"], "verbs": ["get"]},
        # its node and resource summaries
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": list(READ_VERBS)},
        # the namespace sync and the execution controller make the workloads' namespaces
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": list(WRITE_VERBS)},
    ]
    for group in sorted(by_group):
        plurals = sorted(set(by_group[group]))
        rules.append({"apiGroups": [group], "resources": plurals, "verbs": list(WRITE_VERBS)})
        rules.append({"apiGroups": [group], "resources": [f"{p}/status" for p in plurals],
                      "verbs": ["get"]})
    return rules


def agent_rules(name: str) -> list[Manifest]:
    """What the agent of ``name`` may do in the control plane (charts/agent, controlPlane)."""
    return [
        {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters"],
         "resourceNames": [name], "verbs": ["get"]},
        {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters/status"],
         "resourceNames": [name], "verbs": ["patch", "update"]},
    ]


# --- manifests ------------------------------------------------------------------------------

def _meta(name: str, namespace: str | None = None,
          owner: Mapping[str, Any] | None = None) -> Manifest:
    body: Manifest = {"name": name, "labels": dict(MANAGED_BY)}
    if namespace is not None:
        body["namespace"] = namespace
    if owner is not None:
        body["ownerReferences"] = [dict(owner)]
    return body


def namespace(name: str) -> Manifest:
    """A Namespace."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name)}


def service_account(name: str, ns: str, owner: Mapping[str, Any] | None = None) -> Manifest:
    """A ServiceAccount."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, ns, owner)}


def account_token(account: str, ns: str, owner: Mapping[str, Any] | None = None) -> Manifest:
    """A long-lived token Secret of ``account``, filled by the token controller."""
    meta = _meta(token_secret(account), ns, owner)
    meta["annotations"] = {"kubernetes.io/service-account.name": account}
    return {"apiVersion": "v1", "kind": "Secret", "type": SERVICE_ACCOUNT_TOKEN,
            "metadata": meta}


def cluster_role(name: str, rules: list[Manifest],
                 owner: Mapping[str, Any] | None = None) -> Manifest:
    """A ClusterRole."""
    return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
            "metadata": _meta(name, owner=owner), "rules": rules}


def cluster_role_binding(name: str, account: str, ns: str,
                         owner: Mapping[str, Any] | None = None) -> Manifest:
    """A ClusterRoleBinding of the ClusterRole ``name`` to one ServiceAccount."""
    return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
            "metadata": _meta(name, owner=owner),
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def cluster_secret(member: Member, token: str,
                   owner: Mapping[str, Any] | None = None) -> Manifest:
    """``karmada-cluster/<name>`` in the control plane: ``caBundle`` and ``token``."""
    data = {"token": _b64(token.encode())}
    if member.ca:
        data["caBundle"] = _b64(member.ca)
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(member.name, CLUSTER_NAMESPACE, owner), "data": data}


def cluster(member: Member, options: Options) -> Manifest:
    """The Cluster: Push mode, the member's endpoint and ID, the Secret's reference."""
    spec: Manifest = {
        "id": member.cluster_id,
        "apiEndpoint": member.server,
        "syncMode": "Push",
        "secretRef": {"namespace": CLUSTER_NAMESPACE, "name": member.name},
    }
    if member.insecure:
        spec["insecureSkipTLSVerification"] = True
    if member.proxy_url:
        spec["proxyURL"] = member.proxy_url
    if options.provider:
        spec["provider"] = options.provider
    if options.region:
        spec["region"] = options.region
    return {"apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "metadata": _meta(member.name), "spec": spec}


def owner_reference(cluster_obj: Mapping[str, Any]) -> Manifest:
    """An ownerReference to the Cluster: deleting it deletes what was made for it."""
    meta = cluster_obj["metadata"]
    return {"apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "name": meta["name"], "uid": meta["uid"]}


def kubeconfig(plane: ControlPlane, token: str, cluster_name: str) -> str:
    """A kubeconfig for the agent of ``cluster_name``: the control plane and its token."""
    entry: Manifest = {"server": plane.server}
    if plane.ca:
        entry["certificate-authority-data"] = _b64(plane.ca)
    if plane.insecure:
        entry["insecure-skip-tls-verify"] = True
    user = agent_role(cluster_name)
    document = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "control-plane", "cluster": entry}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "control-plane",
                      "context": {"cluster": "control-plane", "user": user}}],
        "current-context": "control-plane",
    }
    return yaml.safe_dump(document, sort_keys=False)


def agent_kubeconfig_secret(plane: ControlPlane, token: str, cluster_name: str,
                            ns: str) -> Manifest:
    """The agent's kubeconfig Secret in the member, where the agent chart mounts it from."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(AGENT_SECRET, ns),
            "data": {AGENT_SECRET_KEY: _b64(kubeconfig(plane, token, cluster_name).encode())}}


# --- comparing with what the server holds -----------------------------------------------------

def differs(desired: Any, live: Any) -> bool:
    """Whether ``live`` lacks or contradicts anything of ``desired`` (extra fields allowed)."""
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return True
        return any(differs(value, live.get(key)) for key, value in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return True
        return any(differs(d, v) for d, v in zip(desired, live, strict=True))
    return bool(desired != live)


def describe(resource: resources.Resource, manifest: Mapping[str, Any]) -> str:
    """``kind.group/name`` as kubectl prints it (``namespace/x``, ``clusterrole.rbac...``)."""
    kind = resource.kind.lower()
    prefix = f"{kind}.{resource.group}" if resource.group else kind
    meta = manifest["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{prefix}/{where}{meta['name']}"


def helm_command(helm: str, release: str, chart: str, namespace_: str,
                 kubeconfig_path: str | None, context: str | None,
                 sets: Sequence[str], values: Sequence[str] = ()) -> list[str]:
    """``helm upgrade --install``: idempotent, the same command for a first install and later."""
    argv = [helm, "upgrade", "--install", release, chart, "--namespace", namespace_,
            "--create-namespace"]
    if kubeconfig_path:
        argv += ["--kubeconfig", kubeconfig_path]
    if context:
        argv += ["--kube-context", context]
    for item in values:
        argv += ["--values", item]
    for item in sets:
        argv += ["--set", item]
    return argv


def agent_sets(name: str) -> list[str]:
    """The agent chart's values for this member."""
    return [f"clusterName={name}"]


def mci_member_sets() -> list[str]:
    """The MCI provider chart's values for its read-only identity in a member.

    Its own ServiceAccount and long-lived token (``charts/mci-provider``, "Member clusters").
    """
    return ["target=member", "crds.enabled=false"]


def mci_credentials(member: Member, token: str) -> Manifest:
    """``clusterhealth-mci-credentials/<name>`` in the control plane.

    The MCI provider's read-only identity in the member: ``caBundle`` (the member's CA,
    as in the Cluster's Secret) and ``token``, in Karmada's shape.
    """
    data = {"token": _b64(token.encode())}
    if member.ca:
        data["caBundle"] = _b64(member.ca)
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(member.name, MCI_CREDENTIALS_NAMESPACE), "data": data}
