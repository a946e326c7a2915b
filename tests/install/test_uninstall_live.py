"""``helm uninstall`` leaves only what docs/operations.md ("Uninstall") says it leaves.

The last test of the folder: it takes the fleet down as the docs say (the users'
MCIs and Remedies first, then every release), then compares every object of every
cluster with those before the first chart was installed.  What Helm rendered is gone;
what is left is exactly the documented list (and what the user made by hand, following
the READMEs), and the documented leftovers are really there.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import installkit as kit
import pytest
import yaml

from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, fleet

pytestmark = pytest.mark.timeout(2400)
CP = environment.CONTROL_PLANE
NS = fleet.NAMESPACE
CRD_DOCS = [yaml.safe_load(p.read_text())
            for p in sorted((fleet.REPO / "charts/clusterhealth-crds/crds").glob("*.yaml"))]
CRDS = {crd["metadata"]["name"] for crd in CRD_DOCS}
API_SERVICES = {f"{version['name']}.{crd['spec']['group']}"
                for crd in CRD_DOCS for version in crd["spec"]["versions"]}
"""What the API server registers itself for the CRDs' group versions (kube-aggregator's
autoregistration); they go with the CRDs."""
GARBAGE = ("Pod", "ReplicaSet.apps", "ControllerRevision.apps")
"""Deleted by the garbage collector after ``helm uninstall`` deleted their owners."""


def documented(members: tuple[str, ...]) -> dict[str, set[tuple[str, str, str]]]:
    """docs/operations.md's table "What uninstalling leaves", object by object."""
    cp = {("CustomResourceDefinition.apiextensions.k8s.io", "", name) for name in CRDS}
    cp |= {("APIService.apiregistration.k8s.io", "", name) for name in API_SERVICES}
    cp |= {("Lease.coordination.k8s.io", NS, name) for name in (
        "clusterhealth-controlplane-controller-manager", "clusterhealth-controlplane-scheduler",
        "clusterhealth-remedy", "clusterhealth-mci-provider")}
    cp |= _namespace(NS)  # helm install --create-namespace
    for member in members:
        cp |= {("Cluster.cluster.karmada.io", "", member)}  # registered (karmadactl join)
        cp |= _namespace(f"karmada-es-{member}")  # the execution space, with its Works
        cp |= {("Work.work.karmada.io", f"karmada-es-{member}", "shop-<hash>")}  # its sync
        # made by hand, as the agent's README says
        cp |= {("ServiceAccount", "karmada-cluster", f"clusterhealth-agent-{member}"),
               ("Secret", "karmada-cluster", f"clusterhealth-agent-{member}-token")}
    cp |= _namespace("karmada-cluster") | {("Secret", "karmada-cluster", m) for m in members}
    # made by hand, as the MCI provider's README says: its member credentials
    cp |= _namespace("clusterhealth-mci-credentials") | {
        ("Secret", "clusterhealth-mci-credentials", m) for m in members}
    left = {CP: cp}
    for member in members:
        left[member] = {("Lease.coordination.k8s.io", NS, "clusterhealth-agent"),
                        *_namespace(NS),
                        # made by hand, as the agent's README says
                        ("Secret", NS, "clusterhealth-agent-karmada-kubeconfig")}
    return left


def _namespace(name: str) -> set[tuple[str, str, str]]:
    """A namespace and what Kubernetes puts in every one."""
    return {("Namespace", "", name), ("ServiceAccount", name, "default"),
            ("ConfigMap", name, "kube-root-ca.crt")}


def _named(item: tuple[str, str, str]) -> tuple[str, str, str]:
    """A Work's name ends in a hash of what it carries."""
    resource, namespace, name = item
    if resource == "Work.work.karmada.io":
        return resource, namespace, name.rsplit("-", 1)[0] + "-<hash>"
    return item


def _ours(item: tuple[str, str, str]) -> bool:
    """Not the application's (``shop``) nor the clusters' own churn (Pods, node Leases)."""
    resource, namespace, name = item
    if namespace in (fleet.SHOP, "kube-system", "kube-node-lease", "kube-public"):
        return False
    if resource == "Namespace" and name == fleet.SHOP:
        return False
    return not resource.startswith(("Endpoints", "EndpointSlice", "Event"))


async def test_uninstall_leaves_only_what_the_docs_say(
        installed: tuple[fleet.Fleet, kit.Snapshot]) -> None:
    the_fleet, before = installed
    members = tuple(the_fleet.env.members)
    rendered: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for release, cluster, namespace in _releases(members):
        args = ["get", "manifest", release] + (["--namespace", namespace] if namespace else [])
        rendered[(cluster, release, namespace or "default")] = [
            d for d in yaml.safe_load_all((await the_fleet.helm(cluster, *args)).stdout) if d]
    for step in fleet.uninstall_steps(members):
        await the_fleet.step(step)
    after = await _collected(the_fleet)
    for (cluster, release, namespace), documents in rendered.items():
        assert documents, release
        present = {(kind.split(".", 1)[0], ns, name) for kind, ns, name in after[cluster]}
        for doc in documents:
            kind, meta = doc["kind"], doc["metadata"]
            where = "" if kind in CLUSTER_SCOPED else meta.get("namespace") or namespace
            assert (kind, where, meta["name"]) not in present, (release, kind, meta["name"])
    expected = documented(members)
    for cluster in after:
        theirs = await _addresses_of_others(the_fleet, cluster)
        leftovers = {_named(o) for o in after[cluster] - before[cluster]
                     if _ours(o) and o not in theirs}
        assert leftovers == expected[cluster], (
            cluster, "undocumented:", sorted(leftovers - expected[cluster]),
            "documented but gone:", sorted(expected[cluster] - leftovers))
    await _documented_state_is_there(the_fleet)


async def _collected(the_fleet: fleet.Fleet, timeout: float = 120.0) -> kit.Snapshot:
    """Every object once the garbage collector removed the releases' Pods (the Pods end
    within their grace period after ``helm uninstall`` deleted their Deployments)."""
    deadline = time.monotonic() + timeout
    while True:
        after = await kit.snapshot(the_fleet)
        pending = sorted(o for objects in after.values() for o in objects
                         if o[1] == NS and o[0] in GARBAGE)
        if not pending:
            return after
        if time.monotonic() > deadline:
            raise AssertionError(f"still there {timeout:.0f} s after helm uninstall: {pending}")
        await asyncio.sleep(2)


async def _addresses_of_others(the_fleet: fleet.Fleet, cluster: str
                               ) -> set[tuple[str, str, str]]:
    """The Service IPs (cluster-scoped ``IPAddress`` objects) of Services not ours (the
    application's); none may belong to a Service of the release namespace any more."""
    listed = json.loads((await the_fleet.kubectl(
        cluster, "get", "ipaddresses.networking.k8s.io", "-o", "json")).stdout)["items"]
    theirs = set()
    for item in listed:
        parent = (item.get("spec") or {}).get("parentRef") or {}
        assert parent.get("namespace") != NS, (cluster, item["metadata"]["name"], parent)
        if not _ours(("Service", str(parent.get("namespace", "")), "")):
            theirs.add(("IPAddress.networking.k8s.io", "", item["metadata"]["name"]))
    return theirs


CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                  "IngressClass", "CustomResourceDefinition", "Namespace"}


def _releases(members: tuple[str, ...]) -> list[tuple[str, str, str | None]]:
    found: list[tuple[str, str, str | None]] = [
        ("clusterhealth-controlplane", CP, NS), ("clusterhealth-remedy", CP, NS),
        ("clusterhealth-mci-provider", CP, NS)]
    for member in members:
        found += [("clusterhealth-agent", member, NS),
                  ("clusterhealth-mci-provider", member, NS),
                  (f"clusterhealth-agent-rbac-{member}", CP, "karmada-cluster")]
    return found


async def _documented_state_is_there(the_fleet: fleet.Fleet) -> None:
    """The status the docs say stays: the agents' conditions on Nodes and Clusters; no
    remedy action (the Remedies were deleted first)."""
    env = the_fleet.env
    async with env.client() as cp:
        for member in env.members:
            cluster = await cp.get(resources.CLUSTERS, member)
            assert kit.condition(cluster, fleet.DNS_CONDITION) is not None
            assert not (cluster.get("status") or {}).get("remedyActions")
    for member in env.members:
        async with env.client(member) as api:
            for node in (await api.list(resources.NODES))["items"]:
                assert kit.condition(node, fleet.DNS_CONDITION) is not None
    releases = json.loads((await the_fleet.helm(CP, "list", "--all-namespaces", "-o", "json"))
                          .stdout)
    assert releases == []
