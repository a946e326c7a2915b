"""The clusterhealth-remedy chart: what it renders, what it refuses, and least privilege.

What it renders like the other controllers' charts (the Deployment's shape, the
PodDisruptionBudget, image and metrics values) is tested in ``test_controller_charts.py``.

Every manifest is validated with kubernetes-validate (strict, the project's
Kubernetes version) except the monitoring.coreos.com ServiceMonitor, which it
has no schema for: its structure is checked here instead.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import chartkit
import kubernetes_validate
import pytest
import yaml

from clusterhealth_localenv import binaries

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "remedy"
KUBERNETES = binaries.KUBERNETES_VERSION.lstrip("v")
NAMESPACE = "clusterhealth-system"
RELEASE = "clusterhealth-remedy"
MONITORING = "monitoring.coreos.com/v1"
KARMADA_HOST = {"kubeconfigSecret": {"name": "karmada-kubeconfig", "key": "config"},
                "crds": {"enabled": False}}

Manifest = chartkit.Manifest
Render = chartkit.Render


_run_helm = chartkit.run_helm


_one = chartkit.one


_kinds = chartkit.kinds


def _pod(documents: list[Manifest]) -> Manifest:
    pod: Manifest = _one(documents, "Deployment")["spec"]["template"]["spec"]
    return pod


def _container(documents: list[Manifest]) -> Manifest:
    pod = _pod(documents)
    assert [c["name"] for c in pod["containers"]] == ["remedy"]
    container: Manifest = pod["containers"][0]
    return container


RBAC_KINDS = ["ClusterRole", "ClusterRoleBinding", "Role", "Role", "RoleBinding", "RoleBinding"]


# --- the chart itself ------------------------------------------------------------------

def test_defaults_render_valid_manifests(render: Render) -> None:
    documents = render()
    assert _kinds(documents) == sorted([
        "ServiceAccount", *RBAC_KINDS, "Service", "Deployment", "PodDisruptionBudget",
        "NetworkPolicy",
    ])
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES, strict=True)
    for document in documents:
        labels = document["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "clusterhealth-remedy"
        assert labels["app.kubernetes.io/part-of"] == "clusterhealth"


# --- the Deployment --------------------------------------------------------------------

def test_deployment_defaults(render: Render) -> None:
    documents = render()
    deployment = _one(documents, "Deployment")
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    pod = _pod(documents)
    assert pod["serviceAccountName"] == RELEASE
    assert pod["automountServiceAccountToken"] is True
    assert not {"nodeSelector", "tolerations", "priorityClassName"} & set(pod)
    container = _container(documents)
    assert container["image"] == "clusterhealth:0.1.0"
    assert container["command"] == ["python", "-m", "clusterhealth_remedy"]


def test_deployment_args(render: Render) -> None:
    assert _container(render())["args"] == [
        "--resync-period=5m",
        "--workers=2",
        "--event-namespace=default",
        "--healthz-port=10359",
        "--leader-elect=true",
        "--leader-elect-lease-duration=15s",
        "--leader-elect-renew-deadline=10s",
        "--leader-elect-retry-period=2s",
        f"--leader-elect-resource-name={RELEASE}",
        f"--leader-elect-resource-namespace={NAMESPACE}",
    ]


def test_deployment_args_follow_values(render: Render) -> None:
    args = _container(render({
        "resyncPeriod": "90s", "workers": 8, "eventNamespace": "kube-system",
        "leaderElection": {"leaseDuration": "1m", "renewDeadline": "40.5s",
                           "retryPeriod": "500ms"},
        "extraArgs": ["--bind-address=127.0.0.1", "--context=karmada"],
    }))["args"]
    for expected in ("--resync-period=90s", "--workers=8", "--event-namespace=kube-system",
                     "--leader-elect-lease-duration=1m", "--leader-elect-renew-deadline=40.5s",
                     "--leader-elect-retry-period=500ms"):
        assert expected in args
    assert args[-2:] == ["--bind-address=127.0.0.1", "--context=karmada"]
    assert not [a for a in args if a.startswith("--kubeconfig")]


# --- values that are refused -----------------------------------------------------------

@pytest.mark.parametrize("item", ["replicas=0", "workers=100", "resyncPeriod=5", "foo=bar"])
def test_schema_rejects_bad_values_given_with_set(render_error: Callable[..., str],
                                                  item: str) -> None:
    assert "don't meet the specifications of the schema" in render_error(None, item)


def test_lease_timings_in_mixed_units(render: Render) -> None:
    args = _container(render({"leaderElection": {"leaseDuration": "0.5m",
                                                 "renewDeadline": "29.9s",
                                                 "retryPeriod": "1500ms"}}))["args"]
    assert "--leader-elect-lease-duration=0.5m" in args


# --- RBAC ------------------------------------------------------------------------------

def _rules(documents: list[Manifest]) -> list[tuple[str, str, str, Manifest]]:
    return [(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"], rule)
            for d in documents if d["kind"] in ("Role", "ClusterRole") for rule in d["rules"]]


def _granted(documents: list[Manifest]) -> set[tuple[str, str, str, str, tuple[str, ...]]]:
    return {(namespace, group, resource, verb, tuple(rule.get("resourceNames", [])))
            for _, namespace, _, rule in _rules(documents) for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def _expected_grants(event_namespace: str = "default", lease: str = RELEASE,
                     namespace: str = NAMESPACE) -> set[tuple[str, str, str, str,
                                                              tuple[str, ...]]]:
    return {
        ("", "cluster.karmada.io", "clusters", "get", ()),
        ("", "cluster.karmada.io", "clusters", "list", ()),
        ("", "cluster.karmada.io", "clusters", "watch", ()),
        ("", "cluster.karmada.io", "clusters/status", "patch", ()),
        ("", "cluster.karmada.io", "clusters/status", "update", ()),
        ("", "remedy.karmada.io", "remedies", "get", ()),
        ("", "remedy.karmada.io", "remedies", "list", ()),
        ("", "remedy.karmada.io", "remedies", "watch", ()),
        ("", "remedy.karmada.io", "remedies/status", "patch", ()),
        ("", "remedy.karmada.io", "remedies/status", "update", ()),
        (event_namespace, "", "events", "create", ()),
        (event_namespace, "", "events", "patch", ()),
        (namespace, "coordination.k8s.io", "leases", "create", ()),
        (namespace, "coordination.k8s.io", "leases", "get", (lease,)),
        (namespace, "coordination.k8s.io", "leases", "update", (lease,)),
        (namespace, "coordination.k8s.io", "leases", "watch", (lease,)),
    }


@pytest.mark.parametrize("event_namespace", ["default", "kube-system"])
def test_rbac_is_exactly_least_privilege(render: Render, event_namespace: str) -> None:
    documents = render({"eventNamespace": event_namespace})
    for kind, namespace, name, rule in _rules(documents):
        where = f"{kind} {namespace}/{name}"
        assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, where
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(field, []), f"wildcard {field} in {where}"
            assert not any("*" in item for item in rule.get(field, [])), where
        assert "secrets" not in rule["resources"], where
        assert not {"delete", "deletecollection", "escalate", "bind", "impersonate"} \
            & set(rule["verbs"]), where
    assert _granted(documents) == _expected_grants(event_namespace)
    # ClusterRoles hold only the cluster-scoped grants, Roles only the namespaced ones
    for kind, namespace, _, rule in _rules(documents):
        assert (kind == "ClusterRole") == (namespace == "")
        assert (kind == "ClusterRole") == (rule["apiGroups"][0].endswith("karmada.io"))


def test_rbac_binds_the_deployment_service_account(render: Render) -> None:
    documents = render()
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
             for d in documents if d["kind"] in ("Role", "ClusterRole")}
    bindings = [d for d in documents if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert len(bindings) == len(roles) == 3
    service_account = _one(documents, "ServiceAccount")["metadata"]
    assert _pod(documents)["serviceAccountName"] == service_account["name"]
    for binding in bindings:
        namespace = binding["metadata"].get("namespace", "")
        assert binding["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
        assert (binding["roleRef"]["kind"], namespace, binding["roleRef"]["name"]) in roles
        assert binding["subjects"] == [{"kind": "ServiceAccount",
                                        "name": service_account["name"],
                                        "namespace": service_account["namespace"]}]
    # the Lease the replicas elect with is the one the Role lets them update
    lease_role = _one(documents, "Role", f"{RELEASE}-leader-election")
    args = _container(documents)["args"]
    assert f"--leader-elect-resource-name={lease_role['rules'][1]['resourceNames'][0]}" in args
    assert f"--leader-elect-resource-namespace={lease_role['metadata']['namespace']}" in args
    # and the Events go where the events Role is
    events_role = _one(documents, "Role", f"{RELEASE}-events")
    assert f"--event-namespace={events_role['metadata']['namespace']}" in args


# --- kubeconfigSecret: a host cluster managing another API server (Karmada) ------------

def test_kubeconfig_secret_mounted_and_passed(render: Render) -> None:
    documents = render(KARMADA_HOST)
    container = _container(documents)
    pod = _pod(documents)
    assert container["args"][0] == "--kubeconfig=/etc/clusterhealth/kubeconfig/config"
    assert len([a for a in container["args"] if a.startswith("--kubeconfig")]) == 1
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert set(mounts) == set(volumes) == {"kubeconfig", "tmp"}
    assert mounts["kubeconfig"] == {"name": "kubeconfig",
                                    "mountPath": "/etc/clusterhealth/kubeconfig",
                                    "readOnly": True}
    assert volumes["kubeconfig"]["secret"] == {
        "secretName": "karmada-kubeconfig", "defaultMode": 0o440,
        "items": [{"key": "config", "path": "config"}]}
    # nothing of the host's API server: no token, no RBAC, no CRDs
    assert pod["automountServiceAccountToken"] is False
    assert _one(documents, "ServiceAccount")["automountServiceAccountToken"] is False
    assert _kinds(documents) == sorted(["ServiceAccount", "Service", "Deployment",
                                        "PodDisruptionBudget", "NetworkPolicy"])
    assert chartkit.crd_names(render(KARMADA_HOST, include_crds=True)) == []
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES, strict=True)


def test_kubeconfig_secret_default_key(render: Render) -> None:
    documents = render(None, "kubeconfigSecret.name=kc", "crds.enabled=false")
    assert "--kubeconfig=/etc/clusterhealth/kubeconfig/kubeconfig" in _container(documents)["args"]
    volume = next(v for v in _pod(documents)["volumes"] if v["name"] == "kubeconfig")
    assert volume["secret"]["secretName"] == "kc"


def test_rbac_only(render: Render) -> None:
    documents = render({"rbacOnly": True, "crds": {"enabled": False},
                        "serviceMonitor": {"enabled": True}})
    assert _kinds(documents) == sorted(["ServiceAccount", *RBAC_KINDS])
    assert _granted(documents) == _expected_grants()
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES, strict=True)
    # the same names as the host install with the same release name and namespace
    host = render(KARMADA_HOST)
    assert _one(documents, "ServiceAccount")["metadata"] == _one(host, "ServiceAccount")[
        "metadata"] | {"name": RELEASE, "namespace": NAMESPACE}
    args = _container(host)["args"]
    assert f"--leader-elect-resource-name={RELEASE}" in args
    assert f"--leader-elect-resource-namespace={NAMESPACE}" in args
    # rbacOnly into our own control plane may install the CRDs there
    assert chartkit.crd_names(render({"rbacOnly": True}, include_crds=True)) == chartkit.CRDS


# --- metrics ---------------------------------------------------------------------------

def test_service_monitor(render: Render) -> None:
    documents = render({"serviceMonitor": {"enabled": True, "interval": "15s",
                                           "labels": {"release": "prom"}}})
    monitor = _one(documents, "ServiceMonitor")
    assert monitor["apiVersion"] == MONITORING
    assert set(monitor) == {"apiVersion", "kind", "metadata", "spec"}
    assert monitor["metadata"]["namespace"] == NAMESPACE
    assert monitor["metadata"]["labels"]["release"] == "prom"
    service = _one(documents, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() \
        <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics",
                                             "interval": "15s", "honorLabels": True}]


# --- the README documents what the chart does -----------------------------------------

def test_readme_documents_values_and_metrics() -> None:
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for key in values:
        assert f"`{key}" in readme, key
    for metric in ("clusterhealth_remedy_active_actions{cluster,action}",
                   "clusterhealth_remedy_action_sources{cluster,action,remedy}",
                   "clusterhealth_remedy_evaluations_total",
                   "clusterhealth_remedy_status_rejected_total{kind}",
                   "clusterhealth_remedy_is_leader",
                   "clusterhealth_controller_reconcile_total{controller,result}",
                   "clusterhealth_controller_reconcile_duration_seconds{controller}",
                   "clusterhealth_workqueue_depth{name}"):
        assert metric in readme, metric
    # the runtime's families replaced the controller's own
    for gone in ("clusterhealth_remedy_reconcile_duration_seconds",
                 "clusterhealth_remedy_reconcile_errors_total"):
        assert gone not in readme, gone
    assert "--set crds.enabled=false" in readme
