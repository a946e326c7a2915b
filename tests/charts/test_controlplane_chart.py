"""The clusterhealth-controlplane chart: what it renders, what it refuses, and least privilege.

Two leader-elected Deployments (the controller manager and the scheduler), each
with its own ServiceAccount, Lease and RBAC, and the default-tolerations webhook
(Deployment, Service, MutatingWebhookConfiguration, its certificate; no API access).
Every manifest is validated with kubernetes-validate (strict, the project's Kubernetes
version) except the monitoring.coreos.com ServiceMonitor and the cert-manager.io
Certificate, which it has no schema for: their structure is checked here instead.
The names the schema knows (controllers, plugins) are checked against the components'
own tables.
"""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
import re
import ssl
from collections.abc import Callable
from typing import Any

import chartkit
import kubernetes_validate
import prometheus_client
import pytest
import yaml
from cryptography import x509

from clusterhealth_controlplane import controllers, options
from clusterhealth_controlplane import settings as manager_settings
from clusterhealth_controlplane.scheduler import plugins
from clusterhealth_controlplane.webhook import decision, metrics, server
from clusterhealth_controlplane.webhook import settings as webhook_settings
from clusterhealth_core import serving
from clusterhealth_localenv import pki

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "controlplane"
KUBERNETES = chartkit.KUBERNETES
NAMESPACE = "clusterhealth-system"
RELEASE = "clusterhealth-controlplane"
MANAGER = f"{RELEASE}-controller-manager"
SCHEDULER = f"{RELEASE}-scheduler"
WEBHOOK = f"{RELEASE}-webhook"
MONITORING = "monitoring.coreos.com/v1"
CERT_MANAGER = "cert-manager.io/v1"
KARMADA_HOST: dict[str, Any] = {"kubeconfigSecret": {"name": "karmada-kubeconfig",
                                     "controllerManagerKey": "cm", "schedulerKey": "sched"},
                "crds": {"enabled": False}}
# per component: ServiceAccount, ClusterRole(Binding), leader-election Role(Binding);
# the controller manager also its Role(Binding) for the members' Secrets
RBAC_KINDS = ["ClusterRole", "ClusterRoleBinding", "Role", "Role", "RoleBinding", "RoleBinding",
              "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
RUNNING = ["Deployment", "Deployment", "PodDisruptionBudget", "PodDisruptionBudget",
           "Service", "Service", "NetworkPolicy", "NetworkPolicy"]
# the webhook: no RBAC, its own ServiceAccount (no token), the Secret Helm makes
WEBHOOK_KINDS = ["ServiceAccount", "Secret", "Deployment", "Service", "PodDisruptionBudget",
                 "MutatingWebhookConfiguration", "NetworkPolicy"]

Manifest = chartkit.Manifest
Render = chartkit.Render
Grant = tuple[str, str, str, str, tuple[str, ...]]


_one = chartkit.one
_kinds = chartkit.kinds


def _pod(documents: list[Manifest], name: str = MANAGER) -> Manifest:
    pod: Manifest = _one(documents, "Deployment", name)["spec"]["template"]["spec"]
    return pod


def _container(documents: list[Manifest], name: str = MANAGER) -> Manifest:
    pod = _pod(documents, name)
    assert len(pod["containers"]) == 1
    container: Manifest = pod["containers"][0]
    return container


def _validate(documents: list[Manifest]) -> None:
    for document in documents:
        # no schema: see test_service_monitor and test_webhook_cert_manager
        if document["apiVersion"] not in (MONITORING, CERT_MANAGER):
            kubernetes_validate.validate(document, KUBERNETES, strict=True)


# --- the chart itself ------------------------------------------------------------------

def test_schema_closes_each_component() -> None:
    # test_charts.py checks the schema is draft-07 and closed at the top; each component too
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for component in ("controllerManager", "scheduler", "webhook"):
        assert schema["properties"][component]["additionalProperties"] is False
        assert set(values[component]) <= set(schema["properties"][component]["properties"])


def test_defaults_render_valid_manifests(render: Render) -> None:
    documents = render()
    assert _kinds(documents) == sorted(["ServiceAccount", "ServiceAccount", *RBAC_KINDS,
                                        *RUNNING, *WEBHOOK_KINDS])
    _validate(documents)
    for document in documents:
        labels = document["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "clusterhealth-controlplane"
        assert labels["app.kubernetes.io/part-of"] == "clusterhealth"
        assert labels["app.kubernetes.io/component"] in ("controller-manager", "scheduler",
                                                         "webhook")


def test_names_follow_the_release(render: Render, helm: str, tmp_path: pathlib.Path) -> None:
    names = sorted(d["metadata"]["name"] for d in render() if d["kind"] == "Deployment")
    assert names == [MANAGER, SCHEDULER, WEBHOOK]
    short = chartkit.renderer(helm, CHART, "cp", NAMESPACE, tmp_path)()
    assert sorted(d["metadata"]["name"] for d in short if d["kind"] == "Deployment") == [
        "cp-clusterhealth-controlplane-controller-manager",
        "cp-clusterhealth-controlplane-scheduler", "cp-clusterhealth-controlplane-webhook"]
    # a long release name is shortened, the component's suffix kept (Service names <= 63)
    long = chartkit.renderer(helm, CHART, "a-rather-long-release-name-for-testing-x",
                             NAMESPACE, tmp_path)()
    services = sorted(d["metadata"]["name"] for d in long if d["kind"] == "Service")
    assert [len(s) <= 63 for s in services] == [True, True, True]
    assert services[0].endswith("-controller-manager") and services[1].endswith("-scheduler")
    assert services[2].endswith("-webhook")
    _validate(long)


# --- the Deployments -------------------------------------------------------------------

@pytest.mark.parametrize(("name", "module", "port"), [
    (MANAGER, "clusterhealth_controlplane", 10357),
    (SCHEDULER, "clusterhealth_controlplane.scheduler", 10351),
])
def test_deployment_defaults(render: Render, name: str, module: str, port: int) -> None:
    documents = render()
    deployment = _one(documents, "Deployment", name)
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    pod = _pod(documents, name)
    assert pod["serviceAccountName"] == name
    assert pod["automountServiceAccountToken"] is True
    assert not {"nodeSelector", "tolerations", "priorityClassName"} & set(pod)
    assert pod["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"}}
    container = _container(documents, name)
    assert container["image"] == "clusterhealth:0.1.0"
    assert container["command"] == ["python", "-m", module]
    assert container["ports"] == [{"name": "metrics", "containerPort": port,
                                   "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["resources"] == {"requests": {"cpu": "50m", "memory": "128Mi"},
                                      "limits": {"memory": "512Mi"}}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False,
                                            "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    assert container["env"] == [{"name": "POD_NAMESPACE", "valueFrom": {
        "fieldRef": {"fieldPath": "metadata.namespace"}}}]
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}]
    # the two Deployments select only their own pods
    other = SCHEDULER if name == MANAGER else MANAGER
    other_labels = _one(documents, "Deployment", other)["spec"]["template"]["metadata"]["labels"]
    assert not deployment["spec"]["selector"]["matchLabels"].items() <= other_labels.items()


def _leader_args(name: str) -> list[str]:
    return ["--leader-elect=true", "--leader-elect-lease-duration=15s",
            "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s",
            f"--leader-elect-resource-name={name}",
            f"--leader-elect-resource-namespace={NAMESPACE}"]


FAILOVER_DEFAULTS = [
    "--cluster-status-update-frequency=10s", "--cluster-success-threshold=30s",
    "--cluster-failure-threshold=30s", "--cluster-monitor-grace-period=40s",
    "--failover-eviction-timeout=5m", "--graceful-eviction-timeout=10m",
    "--eviction-rate=0.5", "--secondary-eviction-rate=0.1",
    "--unhealthy-cluster-threshold=0.55", "--failback-stabilization-window=5m"]


def test_deployment_args(render: Render) -> None:
    documents = render()
    assert _container(documents, MANAGER)["args"] == [
        "--controllers=*", "--resync-period=5m", *FAILOVER_DEFAULTS,
        # its own namespace and the MCI provider's credentials never reach the members
        f"--skipped-propagating-namespaces={NAMESPACE},clusterhealth-mci-credentials",
        "--workers=4",
        "--event-namespace=default", "--healthz-port=10357", *_leader_args(MANAGER)]
    assert _container(documents, SCHEDULER)["args"] == [
        "--plugins=*", "--workers=8", "--event-namespace=default", "--healthz-port=10351",
        *_leader_args(SCHEDULER)]


def _kubeconfig(tmp_path: pathlib.Path) -> pathlib.Path:
    """A kubeconfig the settings loaders accept (nothing connects to it)."""
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


def test_the_args_are_the_components_flags(render: Render, tmp_path: pathlib.Path) -> None:
    """Every flag the chart passes is one the component parses (and validates)."""
    documents = render({"controllerManager": {"controllers": "*,-execution"}})
    args = _container(documents, MANAGER)["args"]
    kubeconfig = _kubeconfig(tmp_path)
    loaded = manager_settings.load([*args, f"--kubeconfig={kubeconfig}"],
                                   environ={"POD_NAMESPACE": NAMESPACE})
    assert loaded.controllers == ("detector", "binding", "namespaceSync", "workStatus",
                                  "bindingStatus",
                                  "clusterStatus", "clusterTaint", "taintManager",
                                  "gracefulEviction", "failback")
    assert loaded.election.lease_name == MANAGER
    assert loaded.election.lease_namespace == NAMESPACE
    assert loaded.healthz_port == 10357
    # the scheduler's flags: those its settings module parses (written beside this chart)
    scheduler_flags = {a.split("=", 1)[0] for a in _container(documents, SCHEDULER)["args"]}
    manager_flags = {a.split("=", 1)[0] for a in args}
    assert scheduler_flags - manager_flags == {"--plugins"}
    assert manager_flags - scheduler_flags == {
        "--controllers", "--resync-period", "--skipped-propagating-namespaces"} | {
        a.split("=", 1)[0] for a in FAILOVER_DEFAULTS}
    # the chart's failover defaults are the component's own; its namespace is skipped
    assert loaded.options == options.Options(propagation=options.Propagation(
        skipped_namespaces=(re.compile(NAMESPACE), re.compile("clusterhealth-mci-credentials"))))


def test_failover_values_become_the_flags(render: Render, tmp_path: pathlib.Path) -> None:
    documents = render({"controllerManager": {"failover": {
        "failureThreshold": "1m", "evictionRate": 0, "secondaryEvictionRate": 0,
        "unhealthyClusterThreshold": 0.4, "failbackWindow": "90s"}}})
    args = _container(documents, MANAGER)["args"]
    kubeconfig = _kubeconfig(tmp_path)
    loaded = manager_settings.load([*args, f"--kubeconfig={kubeconfig}"],
                                   environ={"POD_NAMESPACE": NAMESPACE})
    assert loaded.options.health.failure_threshold == 60.0
    assert loaded.options.health.success_threshold == 30.0  # the others keep their defaults
    assert loaded.options.eviction.rate == 0.0
    assert loaded.options.eviction.secondary_rate == 0.0
    assert loaded.options.eviction.unhealthy_cluster_threshold == 0.4
    assert loaded.options.failback.window == 90.0


@pytest.mark.parametrize("failover", [
    {"failureThreshold": "-5s"}, {"evictionTimeout": "0s"}, {"evictionRate": -1},
    {"unhealthyClusterThreshold": 0}, {"unhealthyClusterThreshold": 1.5}, {"typo": "1m"}])
def test_bad_failover_values_are_refused(render_error: Callable[..., str],
                                         failover: dict[str, Any]) -> None:
    assert "failover" in render_error({"controllerManager": {"failover": failover}})


def test_deployment_args_follow_values(render: Render) -> None:
    documents = render({
        "controllerManager": {"controllers": "detector,binding", "workers": 16,
                              "resyncPeriod": "90s", "extraArgs": ["--http-library=httpx"]},
        "scheduler": {"plugins": "*,-ClusterLocality", "workers": 32,
                      "extraArgs": ["--scheduler-name=mine"]},
        "eventNamespace": "kube-system",
        "leaderElection": {"leaseDuration": "1m", "renewDeadline": "40.5s",
                           "retryPeriod": "500ms"},
    })
    manager, scheduler = _container(documents, MANAGER)["args"], _container(documents,
                                                                             SCHEDULER)["args"]
    for expected in ("--controllers=detector,binding", "--workers=16", "--resync-period=90s",
                     "--event-namespace=kube-system", "--leader-elect-lease-duration=1m",
                     "--leader-elect-renew-deadline=40.5s",
                     "--leader-elect-retry-period=500ms"):
        assert expected in manager
    for expected in ("--plugins=*,-ClusterLocality", "--workers=32",
                     "--event-namespace=kube-system", "--leader-elect-lease-duration=1m"):
        assert expected in scheduler
    assert manager[-1] == "--http-library=httpx"
    assert scheduler[-1] == "--scheduler-name=mine"
    assert not [a for a in manager + scheduler if a.startswith("--kubeconfig")]


def test_replicas_and_resources_per_component(render: Render) -> None:
    documents = render({"controllerManager": {"replicas": 1,
                                              "resources": {"requests": {"cpu": "1"}}},
                        "scheduler": {"replicas": 3}})
    assert _one(documents, "Deployment", MANAGER)["spec"]["replicas"] == 1
    assert _one(documents, "Deployment", SCHEDULER)["spec"]["replicas"] == 3
    # Helm merges maps: the default memory request and limit stay
    assert _container(documents, MANAGER)["resources"] == {
        "requests": {"cpu": "1", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
    assert _container(documents, SCHEDULER)["resources"]["limits"] == {"memory": "512Mi"}
    # a PodDisruptionBudget only for the Deployment with more than one replica
    pdbs = [d["metadata"]["name"] for d in documents if d["kind"] == "PodDisruptionBudget"]
    assert sorted(pdbs) == [SCHEDULER, WEBHOOK]
    pdb = _one(documents, "PodDisruptionBudget", SCHEDULER)
    assert pdb["spec"] == {"minAvailable": 1, "selector": {
        "matchLabels": _one(documents, "Deployment", SCHEDULER)["spec"]["selector"][
            "matchLabels"]}}


def test_scheduling_values_apply_to_every_deployment(render: Render) -> None:
    documents = render()
    for name in (MANAGER, SCHEDULER, WEBHOOK):
        selector = _one(documents, "Deployment", name)["spec"]["selector"]["matchLabels"]
        assert _pod(documents, name)["affinity"] == {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                    "labelSelector": {"matchLabels": selector}}}]}}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}]}}}
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "cp",
                    "effect": "NoSchedule"}]
    documents = render({"affinity": affinity, "tolerations": tolerations,
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "priorityClassName": "system-cluster-critical",
                        "image": {"repository": "registry.example.org/cp", "tag": "1.2.3",
                                  "pullPolicy": "Always"}})
    for name in (MANAGER, SCHEDULER, WEBHOOK):
        pod = _pod(documents, name)
        assert pod["affinity"] == affinity
        assert pod["tolerations"] == tolerations
        assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert pod["priorityClassName"] == "system-cluster-critical"
        assert pod["containers"][0]["image"] == "registry.example.org/cp:1.2.3"
        assert pod["containers"][0]["imagePullPolicy"] == "Always"


def test_scheduler_disabled(render: Render) -> None:
    documents = render({"scheduler": {"enabled": False}})
    assert not [d for d in documents if d["metadata"]["name"].startswith(SCHEDULER)]
    assert [d["metadata"]["name"] for d in documents if d["kind"] == "Deployment"] == [
        MANAGER, WEBHOOK]
    rbac = render({"scheduler": {"enabled": False}, "rbacOnly": True})
    assert not [d for d in rbac if d["metadata"]["name"].startswith(SCHEDULER)]
    assert _one(rbac, "ServiceAccount")["metadata"]["name"] == MANAGER


# --- values that are refused -----------------------------------------------------------

@pytest.mark.parametrize("item", ["controllerManager.workers=100", "scheduler.replicas=0",
                                  "controllerManager.resyncPeriod=5", "foo=bar",
                                  "controllerManager.controllers=nope"])
def test_schema_rejects_bad_values_given_with_set(render_error: Callable[..., str],
                                                  item: str) -> None:
    assert "don't meet the specifications of the schema" in render_error(None, item)


@pytest.mark.parametrize("controllers", ["*", "detector", "-detector,*", "*,-execution",
                                         "binding,execution,workStatus,bindingStatus,detector"])
def test_schema_accepts_controller_selections(render: Render, controllers: str) -> None:
    args = _container(render({"controllerManager": {"controllers": controllers}}))["args"]
    assert f"--controllers={controllers}" in args


@pytest.mark.parametrize("controllers", ["-detector", "*,-detector,-binding,-namespaceSync,"
                                         "-execution,-workStatus,-bindingStatus,-clusterStatus,"
                                         "-clusterTaint,-taintManager,"
                                         "-gracefulEviction,-failback",
                                         "detector,-detector"])
def test_a_selection_of_no_controller_is_refused(render_error: Callable[..., str],
                                                 controllers: str) -> None:
    error = render_error({"controllerManager": {"controllers": controllers}})
    assert "selects no controller" in error, error


def test_schema_knows_the_components_names() -> None:
    """The schema's controller and plugin names are the components' own tables."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    props = schema["properties"]

    def names(pattern: str) -> list[str]:
        found = re.search(r"-\?\(([^)]*)\)", pattern)
        assert found, pattern
        return found.group(1).split("|")

    assert names(props["controllerManager"]["properties"]["controllers"]["pattern"]) \
        == controllers.NAMES
    assert names(props["scheduler"]["properties"]["plugins"]["pattern"]) \
        == list(plugins.default_registry())
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    assert 'list "' + '" "'.join(controllers.NAMES) + '"' in helpers


# --- RBAC ------------------------------------------------------------------------------

def _rules(documents: list[Manifest]) -> list[tuple[str, str, str, Manifest]]:
    return [(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"], rule)
            for d in documents if d["kind"] in ("Role", "ClusterRole") for rule in d["rules"]]


def _granted(documents: list[Manifest], account: str) -> set[Grant]:
    """What ``account`` may do: (namespace or "", group, resource, verb, resourceNames)."""
    bound = set()
    for binding in documents:
        if binding["kind"] in ("RoleBinding", "ClusterRoleBinding") and any(
                s["name"] == account for s in binding["subjects"]):
            bound.add((binding["roleRef"]["kind"], binding["metadata"].get("namespace", ""),
                       binding["roleRef"]["name"]))
    return {(namespace, group, resource, verb, tuple(rule.get("resourceNames", [])))
            for kind, namespace, name, rule in _rules(documents)
            if (kind, namespace, name) in bound
            for group in rule["apiGroups"] for resource in rule["resources"]
            for verb in rule["verbs"]}


def _grants(namespace: str, group: str, resources: str, verbs: str,
            names: tuple[str, ...] = ()) -> set[Grant]:
    return {(namespace, group, r, v, names) for r in resources.split() for v in verbs.split()}


def _lease(name: str) -> set[Grant]:
    return (_grants(NAMESPACE, "coordination.k8s.io", "leases", "create")
            | _grants(NAMESPACE, "coordination.k8s.io", "leases", "get update watch", (name,)))


def _expected_manager(templates: bool = True) -> set[Grant]:
    grants = (
        _grants("", "policy.karmada.io", "propagationpolicies clusterpropagationpolicies",
                "get list watch")
        | _grants("", "policy.karmada.io",
                  "propagationpolicies/status clusterpropagationpolicies/status", "patch update")
        | _grants("", "work.karmada.io", "resourcebindings clusterresourcebindings",
                  "get list watch create patch update delete")
        | _grants("", "work.karmada.io",
                  "resourcebindings/status clusterresourcebindings/status", "patch")
        | _grants("", "work.karmada.io", "works", "get list watch create patch update delete")
        | _grants("", "work.karmada.io", "works/status", "patch")
        | _grants("", "cluster.karmada.io", "clusters", "get list watch patch")
        | _grants("", "policy.karmada.io", "clustertaintpolicies", "get list watch")
        | _grants("", "cluster.karmada.io", "clusters/status", "patch update")
        | _grants("karmada-cluster", "coordination.k8s.io", "leases", "get list watch")
        | _grants("", "", "namespaces", "get list watch create")
        | _grants("", "", "events", "create patch")
        | _grants("karmada-cluster", "", "secrets", "get list watch")
        | _lease(MANAGER))
    if templates:
        grants |= (_grants("", "apps", "deployments statefulsets replicasets",
                           "get list watch patch")
                   | _grants("", "", "services configmaps serviceaccounts",
                             "get list watch patch")
                   | _grants("", "apps", "deployments/status statefulsets/status", "patch"))
    return grants


def _expected_scheduler() -> set[Grant]:
    return (_grants("", "work.karmada.io", "resourcebindings clusterresourcebindings",
                    "get list watch patch")
            | _grants("", "work.karmada.io",
                      "resourcebindings/status clusterresourcebindings/status", "patch update")
            | _grants("", "cluster.karmada.io", "clusters", "get list watch")
            | _grants("", "", "events", "create patch")
            | _lease(SCHEDULER))


def test_rbac_is_exactly_least_privilege(render: Render) -> None:
    documents = render()
    for kind, namespace, name, rule in _rules(documents):
        where = f"{kind} {namespace}/{name}"
        assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, where
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert not any("*" in item for item in rule.get(field, [])), where
        assert not {"deletecollection", "escalate", "bind", "impersonate"} \
            & set(rule["verbs"]), where
    assert _granted(documents, MANAGER) == _expected_manager()
    assert _granted(documents, SCHEDULER) == _expected_scheduler()
    # Secrets: in karmada-cluster (the members' credentials) only, by default
    secrets = {g for g in _granted(documents, MANAGER) if g[2] == "secrets"}
    assert secrets == _grants("karmada-cluster", "", "secrets", "get list watch")
    # the scheduler deletes nothing, creates no binding, reads no Secret
    assert not [g for g in _granted(documents, SCHEDULER)
                if g[3] in ("delete", "create") and g[2] != "leases" and g[2] != "events"]
    # bindings refer to their own ServiceAccount in the release namespace
    for binding in documents:
        if binding["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            assert [s["namespace"] for s in binding["subjects"]] == [NAMESPACE]
            assert binding["subjects"][0]["name"] in (MANAGER, SCHEDULER)


def test_template_kinds_follow_values(render: Render) -> None:
    documents = render({"templateKinds": [
        {"apiGroup": "batch", "resources": ["jobs"], "status": ["jobs"]},
        {"apiGroup": "", "resources": ["configmaps"]}]})
    granted = _granted(documents, MANAGER)
    assert granted == (_expected_manager(templates=False)
                       | _grants("", "batch", "jobs", "get list watch patch")
                       | _grants("", "batch", "jobs/status", "patch")
                       | _grants("", "", "configmaps", "get list watch patch"))
    # without secrets among the templates, none outside karmada-cluster
    assert {g[0] for g in granted if g[2] == "secrets"} == {"karmada-cluster"}
    # arbitrary kinds are a deliberate choice, spelled out
    anything = _granted(render({"templateKinds": [{"apiGroup": "*", "resources": ["*"]}]}),
                        MANAGER)
    assert _grants("", "*", "*", "get list watch patch") <= anything
    assert _granted(render({"templateKinds": []}), MANAGER) == _expected_manager(templates=False)


def test_lease_and_events_match_the_args(render: Render) -> None:
    documents = render({"eventNamespace": "kube-system"})
    for name in (MANAGER, SCHEDULER):
        role = _one(documents, "Role", f"{name}-leader-election")
        args = _container(documents, name)["args"]
        assert f"--leader-elect-resource-name={role['rules'][1]['resourceNames'][0]}" in args
        assert f"--leader-elect-resource-namespace={role['metadata']['namespace']}" in args
        assert "--event-namespace=kube-system" in args
        # Events go to any namespace (namespaced objects' Events go to theirs)
        assert _grants("", "", "events", "create patch") <= _granted(documents, name)


# --- kubeconfigSecret and rbacOnly: a host cluster managing another API server ---------

def test_kubeconfig_secret_mounted_and_passed(render: Render) -> None:
    documents = render(KARMADA_HOST)
    for name, key in ((MANAGER, "cm"), (SCHEDULER, "sched")):
        container, pod = _container(documents, name), _pod(documents, name)
        assert container["args"][0] == f"--kubeconfig=/etc/clusterhealth/kubeconfig/{key}"
        assert len([a for a in container["args"] if a.startswith("--kubeconfig")]) == 1
        assert {"name": "kubeconfig", "mountPath": "/etc/clusterhealth/kubeconfig",
                "readOnly": True} in container["volumeMounts"]
        volume = next(v for v in pod["volumes"] if v["name"] == "kubeconfig")
        # each pod gets only its own component's kubeconfig
        assert volume["secret"] == {"secretName": "karmada-kubeconfig", "defaultMode": 0o440,
                                    "items": [{"key": key, "path": key}]}
        assert pod["automountServiceAccountToken"] is False
    assert [sa["automountServiceAccountToken"] for sa in documents
            if sa["kind"] == "ServiceAccount"] == [False, False]
    # no webhook: its configuration belongs in the API server the components manage
    assert _kinds(documents) == sorted(["ServiceAccount", "ServiceAccount", *RUNNING])
    assert chartkit.crd_names(render(KARMADA_HOST, include_crds=True)) == []
    _validate(documents)


def test_kubeconfig_secret_refusals(render_error: Callable[..., str]) -> None:
    error = render_error({"kubeconfigSecret": {**KARMADA_HOST["kubeconfigSecret"]}})
    assert "set crds.enabled=false" in error, error
    error = render_error({"kubeconfigSecret": {"name": "kc", "controllerManagerKey": "k",
                                               "schedulerKey": "k"},
                          "crds": {"enabled": False}})
    assert "controllerManagerKey and schedulerKey must differ" in error, error


def test_rbac_only(render: Render) -> None:
    documents = render({"rbacOnly": True, "crds": {"enabled": False},
                        "serviceMonitor": {"enabled": True}})
    assert _kinds(documents) == sorted(["ServiceAccount", "ServiceAccount", *RBAC_KINDS])
    assert _granted(documents, MANAGER) == _expected_manager()
    assert _granted(documents, SCHEDULER) == _expected_scheduler()
    _validate(documents)
    # the same names as the host install with the same release name and namespace
    host = render(KARMADA_HOST)
    for name in (MANAGER, SCHEDULER):
        assert f"--leader-elect-resource-name={name}" in _container(host, name)["args"]
        assert _one(documents, "ServiceAccount", name)["metadata"]["namespace"] == NAMESPACE
    assert chartkit.crd_names(render({"rbacOnly": True}, include_crds=True)) == chartkit.CRDS


# --- metrics ---------------------------------------------------------------------------

def test_metrics_services_select_their_pods(render: Render) -> None:
    documents = render()
    for name, port in ((MANAGER, 10357), (SCHEDULER, 10351)):  # the webhook's: above
        service = _one(documents, "Service", name)
        pod_labels = _one(documents, "Deployment", name)["spec"]["template"]["metadata"][
            "labels"]
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"].items() <= pod_labels.items()
        assert service["spec"]["ports"] == [{"name": "metrics", "port": port,
                                             "targetPort": "metrics", "protocol": "TCP"}]


def test_service_monitor(render: Render) -> None:
    assert not [d for d in render() if d["apiVersion"] == MONITORING]
    documents = render({"serviceMonitor": {"enabled": True, "interval": "15s",
                                           "labels": {"release": "prom"}}})
    monitor = _one(documents, "ServiceMonitor")
    assert monitor["apiVersion"] == MONITORING
    assert set(monitor) == {"apiVersion", "kind", "metadata", "spec"}
    assert monitor["metadata"]["labels"]["release"] == "prom"
    # one monitor scrapes both components' Services
    for service in (d for d in documents if d["kind"] == "Service"):
        assert monitor["spec"]["selector"]["matchLabels"].items() \
            <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics",
                                             "interval": "15s", "honorLabels": True}]


# --- the webhook ------------------------------------------------------------------------

def _configuration(documents: list[Manifest]) -> Manifest:
    webhook: Manifest = _one(documents, "MutatingWebhookConfiguration", WEBHOOK)["webhooks"][0]
    return webhook


def test_webhook_defaults(render: Render) -> None:
    documents = render()
    deployment = _one(documents, "Deployment", WEBHOOK)
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1,
                                                               "maxUnavailable": 0}
    pod, container = _pod(documents, WEBHOOK), _container(documents, WEBHOOK)
    # no API access: no token, no RBAC
    assert pod["serviceAccountName"] == WEBHOOK
    assert pod["automountServiceAccountToken"] is False
    assert _one(documents, "ServiceAccount", WEBHOOK)["automountServiceAccountToken"] is False
    assert _granted(documents, WEBHOOK) == set()
    assert container["command"] == ["python", "-m", "clusterhealth_controlplane.webhook"]
    assert container["args"] == [
        "--default-not-ready-toleration-seconds=300",
        "--default-unreachable-toleration-seconds=300", "--secure-port=8443",
        "--cert-dir=/etc/clusterhealth/webhook-certs", "--healthz-port=10361"]
    assert container["ports"] == [
        {"name": "webhook", "containerPort": 8443, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 10361, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["resources"] == {"requests": {"cpu": "20m", "memory": "64Mi"},
                                      "limits": {"memory": "256Mi"}}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # only the pair is mounted, never the CA
    assert {"name": "certificate", "mountPath": "/etc/clusterhealth/webhook-certs",
            "readOnly": True} in container["volumeMounts"]
    volume = next(v for v in pod["volumes"] if v["name"] == "certificate")
    assert volume["secret"] == {"secretName": f"{WEBHOOK}-cert", "defaultMode": 0o440,
                                "items": [{"key": "tls.crt", "path": "tls.crt"},
                                          {"key": "tls.key", "path": "tls.key"}]}
    service = _one(documents, "Service", WEBHOOK)
    assert service["spec"]["selector"].items() \
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert service["spec"]["ports"] == [
        {"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"},
        {"name": "metrics", "port": 10361, "targetPort": "metrics", "protocol": "TCP"}]
    assert _one(documents, "PodDisruptionBudget", WEBHOOK)["spec"]["minAvailable"] == 1
    # the configuration: both policy kinds, CREATE and UPDATE, to the Service's path
    assert _configuration(documents) == {
        "name": "default-tolerations.clusterhealth.io",
        "clientConfig": {
            "service": {"namespace": NAMESPACE, "name": WEBHOOK, "path": server.PATH,
                        "port": 443},
            "caBundle": _one(documents, "Secret", f"{WEBHOOK}-cert")["data"]["ca.crt"]},
        "rules": [{"apiGroups": ["policy.karmada.io"], "apiVersions": ["v1alpha1"],
                   "operations": ["CREATE", "UPDATE"],
                   "resources": ["propagationpolicies", "clusterpropagationpolicies"],
                   "scope": "*"}],
        "failurePolicy": "Fail", "matchPolicy": "Equivalent", "sideEffects": "None",
        "admissionReviewVersions": ["v1"], "timeoutSeconds": 5}


def test_webhook_values(render: Render, tmp_path: pathlib.Path) -> None:
    documents = render({"webhook": {
        "replicas": 1, "failurePolicy": "Ignore", "timeoutSeconds": 10,
        "tolerationSeconds": {"notReady": 0, "unreachable": 86400},
        "extraArgs": ["--bind-address=0.0.0.0"]}})
    assert _one(documents, "Deployment", WEBHOOK)["spec"]["replicas"] == 1
    assert not [d for d in documents if d["kind"] == "PodDisruptionBudget"
                and d["metadata"]["name"] == WEBHOOK]
    configuration = _configuration(documents)
    assert (configuration["failurePolicy"], configuration["timeoutSeconds"]) == ("Ignore", 10)
    # the flags are the webhook's own, parsed by its settings
    args = _container(documents, WEBHOOK)["args"]
    assert args[-1] == "--bind-address=0.0.0.0"
    ca = pki.CertificateAuthority()
    ca.serving("w", ["127.0.0.1"], []).write(tmp_path, "tls")
    loaded = webhook_settings.load([*args, f"--cert-dir={tmp_path}"], environ={})
    assert loaded.defaults == decision.Defaults(not_ready_seconds=0, unreachable_seconds=86400)
    assert (loaded.secure_port, loaded.healthz_port, loaded.bind_address) == (
        8443, 10361, "0.0.0.0")
    # the Service's and probes' ports are the flags'
    ports = {p["name"]: p["containerPort"] for p in _container(documents, WEBHOOK)["ports"]}
    assert ports == {"webhook": loaded.secure_port, "metrics": loaded.healthz_port}


def test_webhook_disabled_or_elsewhere(render: Render) -> None:
    for values in ({"webhook": {"enabled": False}}, KARMADA_HOST,
                   {"rbacOnly": True, "crds": {"enabled": False}}):
        documents = render(values)
        assert not [d for d in documents if d["metadata"]["name"].startswith(WEBHOOK)], values


def _certificate(text: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(text))


async def test_webhook_certificate_made_by_helm(render: Render,
                                                tmp_path: pathlib.Path) -> None:
    """The Secret's pair is served for the Service's names, and the caBundle trusts it."""
    documents = render()
    secret = _one(documents, "Secret", f"{WEBHOOK}-cert")
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    ca_bundle = _configuration(documents)["clientConfig"]["caBundle"]
    assert ca_bundle == secret["data"]["ca.crt"]
    cert = _certificate(secret["data"]["tls.crt"])
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [
        WEBHOOK, f"{WEBHOOK}.{NAMESPACE}", f"{WEBHOOK}.{NAMESPACE}.svc",
        f"{WEBHOOK}.{NAMESPACE}.svc.cluster.local"]
    # what the API server does: TLS to <service>.<namespace>.svc, trusting caBundle only
    for key in ("tls.crt", "tls.key"):
        (tmp_path / key).write_bytes(base64.b64decode(secret["data"][key]))
    webhook = server.WebhookServer(
        decision.Defaults(), serving.TLSConfig(str(tmp_path / "tls.crt"),
                                               str(tmp_path / "tls.key")),
        metrics.WebhookMetrics(prometheus_client.CollectorRegistry()), host="127.0.0.1",
        port=0)
    await webhook.start()
    try:
        trust = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
        async with asyncio.timeout(10):
            _, writer = await asyncio.open_connection(
                "127.0.0.1", webhook.bound_port, ssl=trust,
                server_hostname=f"{WEBHOOK}.{NAMESPACE}.svc")
        writer.close()
        with pytest.raises(ssl.SSLCertVerificationError):
            async with asyncio.timeout(10):
                await asyncio.open_connection("127.0.0.1", webhook.bound_port, ssl=trust,
                                              server_hostname="elsewhere.example")
    finally:
        await webhook.stop()


def test_webhook_certificate_from_your_secret(render: Render) -> None:
    documents = render({"webhook": {"certificate": {"secretName": "my-webhook-tls"}}})
    assert not [d for d in documents if d["kind"] == "Secret"]
    volume = next(v for v in _pod(documents, WEBHOOK)["volumes"] if v["name"] == "certificate")
    assert volume["secret"]["secretName"] == "my-webhook-tls"
    # helm template cannot look the Secret up: no caBundle (an install takes its ca.crt)
    assert "caBundle" not in _configuration(documents)["clientConfig"]
    _validate(documents)


def test_webhook_cert_manager(render: Render) -> None:
    documents = render({"webhook": {"certificate": {"certManagerIssuer": {
        "kind": "ClusterIssuer", "name": "cluster-ca"}}}})
    assert not [d for d in documents if d["kind"] == "Secret"]
    certificate = _one(documents, "Certificate", WEBHOOK)
    assert certificate["apiVersion"] == CERT_MANAGER
    assert set(certificate) == {"apiVersion", "kind", "metadata", "spec"}
    assert certificate["metadata"]["namespace"] == NAMESPACE
    assert certificate["spec"] == {
        "secretName": f"{WEBHOOK}-cert",
        "dnsNames": [WEBHOOK, f"{WEBHOOK}.{NAMESPACE}", f"{WEBHOOK}.{NAMESPACE}.svc",
                     f"{WEBHOOK}.{NAMESPACE}.svc.cluster.local"],
        "issuerRef": {"kind": "ClusterIssuer", "name": "cluster-ca"}}
    configuration = _one(documents, "MutatingWebhookConfiguration", WEBHOOK)
    assert configuration["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{NAMESPACE}/{WEBHOOK}"}
    assert "caBundle" not in configuration["webhooks"][0]["clientConfig"]
    volume = next(v for v in _pod(documents, WEBHOOK)["volumes"] if v["name"] == "certificate")
    assert volume["secret"]["secretName"] == f"{WEBHOOK}-cert"
    _validate(documents)
    # into a Secret named by secretName
    named = render({"webhook": {"certificate": {
        "secretName": "tls", "certManagerIssuer": {"kind": "Issuer", "name": "ca"}}}})
    assert _one(named, "Certificate", WEBHOOK)["spec"]["secretName"] == "tls"


@pytest.mark.parametrize(("values", "message"), [
    ({"failurePolicy": "Never"}, "/webhook/failurePolicy"),
    ({"timeoutSeconds": 0}, "/webhook/timeoutSeconds"),
    ({"timeoutSeconds": 31}, "/webhook/timeoutSeconds"),
    ({"replicas": 0}, "/webhook/replicas"),
    ({"tolerationSeconds": {"notReady": -1, "unreachable": 300}},
     "/webhook/tolerationSeconds/notReady"),
    ({"tolerationSeconds": {"notReady": 300, "unreachable": 1.5}},
     "/webhook/tolerationSeconds/unreachable"),
    ({"tolerationSeconds": {"notReady": "300", "unreachable": 300}},
     "/webhook/tolerationSeconds/notReady"),
    ({"tolerationSeconds": {"notready": 300}}, "/webhook/tolerationSeconds"),
    ({"certificate": {"secretName": "Bad_Name"}}, "/webhook/certificate/secretName"),
    ({"certificate": {"certManagerIssuer": {"kind": "Vault", "name": "x"}}},
     "/webhook/certificate/certManagerIssuer/kind"),
    ({"extraArgs": ["secure-port=1"]}, "/webhook/extraArgs/0"),
    ({"port": 443}, "additional properties 'port' not allowed"),
])
def test_webhook_schema_rejects_bad_values(render_error: Callable[..., str],
                                           values: dict[str, Any], message: str) -> None:
    error = render_error({"webhook": values})
    assert "don't meet the specifications of the schema" in error, error
    assert message in error, error


# --- the README documents what the chart does -----------------------------------------

def test_readme_documents_values() -> None:
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for key, value in values.items():
        assert f"`{key}" in readme, key
        if key in ("controllerManager", "scheduler", "webhook"):
            for sub in value:
                assert f"`{key}.{sub}" in readme, f"{key}.{sub}"
    for name in controllers.NAMES:
        assert f"`{name}`" in readme, name
    assert "--set crds.enabled=false" in readme


def test_the_release_namespace_is_never_propagated(render: Render,
                                                  tmp_path: pathlib.Path) -> None:
    """Found installing for real: the namespace sync copied the control plane's own namespace
    (Leases, tokens) into every member, where deleting it on the control plane deleted the
    agents' namespace.  The release namespace is skipped beside the user's patterns."""
    documents = render({"controllerManager": {"skippedPropagatingNamespaces": ["team-.*"]}})
    args = _container(documents, MANAGER)["args"]
    assert f"--skipped-propagating-namespaces={NAMESPACE},team-.*" in args
    loaded = manager_settings.load([*args, f"--kubeconfig={_kubeconfig(tmp_path)}"],
                                   environ={"POD_NAMESPACE": NAMESPACE})
    assert [p.pattern for p in loaded.options.propagation.skipped_namespaces] == [
        NAMESPACE, "team-.*"]
