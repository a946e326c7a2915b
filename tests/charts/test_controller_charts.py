"""What the charts of the controllers that run as one Deployment render alike, parametrized.

The remedy controller and the MCI provider (and, for the lease timings, the
control plane) share their Deployment's shape, PodDisruptionBudget, image,
metrics and kubeconfig values; before this module each chart's own module
(``test_<chart>_chart.py``) wrote these tests again.  What is particular to
one chart stays there.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import chartkit
import pytest

CHARTS = pathlib.Path(__file__).resolve().parents[2] / "charts"
NAMESPACE = "clusterhealth-system"
MONITORING = "monitoring.coreos.com/v1"
PORTS = {"remedy": 10359, "mci-provider": 10360}
"""The controllers' charts (folders of ``charts/``, also their container's name) and the
metrics port each serves."""
CONTROLLER_ONLY: dict[str, dict[str, object] | None] = {
    "remedy": None, "mci-provider": {"haproxy": {"sidecar": {"enabled": False}}}}
"""The values that leave the controller's container alone in its Pod (no sidecar)."""
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}

Manifest = chartkit.Manifest
Render = chartkit.Render


def _release(chart: str) -> str:
    return f"clusterhealth-{chart}"


@pytest.fixture(params=sorted(PORTS))
def chart(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def render(chart: str, tmp_path: pathlib.Path) -> Render:
    folder = CHARTS / chart
    return chartkit.renderer(chartkit.helm_for(folder), folder, _release(chart), NAMESPACE,
                             tmp_path)


@pytest.fixture
def render_error(chart: str, tmp_path: pathlib.Path) -> Callable[..., str]:
    folder = CHARTS / chart
    return chartkit.error_renderer(chartkit.helm_for(folder), folder, _release(chart),
                                   NAMESPACE, tmp_path)


def _pod(documents: list[Manifest]) -> Manifest:
    pod: Manifest = chartkit.one(documents, "Deployment")["spec"]["template"]["spec"]
    return pod


def _container(documents: list[Manifest], chart: str) -> Manifest:
    (container,) = [c for c in _pod(documents)["containers"] if c["name"] == chart]
    found: Manifest = container
    return found


# --- the chart itself ------------------------------------------------------------------

def test_names_follow_the_release(render: Render, chart: str, tmp_path: pathlib.Path) -> None:
    assert chartkit.one(render(), "Deployment")["metadata"]["name"] == _release(chart)
    folder = CHARTS / chart
    short = chartkit.renderer(chartkit.helm_for(folder), folder, "cp", NAMESPACE, tmp_path)()
    assert chartkit.one(short, "Deployment")["metadata"]["name"] == f"cp-{_release(chart)}"


def test_crds_disabled_drop_them(render: Render) -> None:
    for documents in (render({"crds": {"enabled": False}}, include_crds=True),
                      render(None, "crds.enabled=false", include_crds=True)):
        assert chartkit.crd_names(documents) == []
        # the controller itself is unchanged
        assert chartkit.kinds(documents) == chartkit.kinds(render())


# --- the Deployment --------------------------------------------------------------------

def test_deployment_security_context(render: Render, chart: str) -> None:
    documents = render(CONTROLLER_ONLY[chart])
    assert _pod(documents)["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert _container(documents, chart)["securityContext"] == RESTRICTED_CONTAINER
    # /tmp is the only writable path (readOnlyRootFilesystem)
    assert _container(documents, chart)["volumeMounts"] == [
        {"name": "tmp", "mountPath": "/tmp"}]
    assert _pod(documents)["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}]
    assert not {"hostNetwork", "hostPID", "hostIPC"} & set(_pod(documents))


def test_deployment_env_from_downward_api(render: Render, chart: str) -> None:
    assert _container(render(), chart)["env"] == [
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]


def test_deployment_resources_and_health_probes(render: Render, chart: str) -> None:
    container = _container(render(), chart)
    assert container["resources"] == {"requests": {"cpu": "20m", "memory": "96Mi"},
                                      "limits": {"memory": "256Mi"}}
    assert container["ports"] == [{"name": "metrics", "containerPort": PORTS[chart],
                                   "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_replicas_prefer_different_nodes(render: Render) -> None:
    documents = render()
    selector = chartkit.one(documents, "Deployment")["spec"]["selector"]["matchLabels"]
    assert _pod(documents)["affinity"] == {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": selector}},
        }],
    }}
    # scheduling values replace the default
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}]}}}
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "cp",
                    "effect": "NoSchedule"}]
    pod = _pod(render({"affinity": affinity, "tolerations": tolerations,
                       "nodeSelector": {"kubernetes.io/os": "linux"},
                       "priorityClassName": "system-cluster-critical"}))
    assert pod["affinity"] == affinity
    assert pod["tolerations"] == tolerations
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["priorityClassName"] == "system-cluster-critical"


def test_image_values(render: Render, chart: str) -> None:
    container = _container(render({"image": {"repository": f"registry.example.org/{chart}",
                                             "tag": "1.2.3", "pullPolicy": "Always"}}), chart)
    assert container["image"] == f"registry.example.org/{chart}:1.2.3"
    assert container["imagePullPolicy"] == "Always"


# --- PodDisruptionBudget ---------------------------------------------------------------

@pytest.mark.parametrize("replicas", [2, 3])
def test_pdb_with_several_replicas(render: Render, chart: str, replicas: int) -> None:
    documents = render({"replicas": replicas})
    assert chartkit.one(documents, "Deployment")["spec"]["replicas"] == replicas
    pdb = chartkit.one(documents, "PodDisruptionBudget", _release(chart))
    assert pdb["metadata"]["namespace"] == NAMESPACE
    assert pdb["spec"] == {"minAvailable": 1, "selector": {
        "matchLabels": chartkit.one(documents, "Deployment")["spec"]["selector"]["matchLabels"]}}


def test_no_pdb_with_one_replica(render: Render) -> None:
    documents = render({"replicas": 1})
    assert chartkit.one(documents, "Deployment")["spec"]["replicas"] == 1
    assert "PodDisruptionBudget" not in chartkit.kinds(documents)
    assert "PodDisruptionBudget" not in chartkit.kinds(render(None, "replicas=1"))


# --- values that are refused -----------------------------------------------------------

@pytest.mark.parametrize("chart", [*sorted(PORTS), "controlplane"], indirect=True)
@pytest.mark.parametrize("timings", [
    {"leaseDuration": "15s", "renewDeadline": "15s", "retryPeriod": "2s"},
    {"leaseDuration": "10s", "renewDeadline": "15s", "retryPeriod": "2s"},
    {"leaseDuration": "1m", "renewDeadline": "60s", "retryPeriod": "2s"},
    {"leaseDuration": "15s", "renewDeadline": "2000ms", "retryPeriod": "2s"},
    {"leaseDuration": "1h", "renewDeadline": "59m", "retryPeriod": "1h"},
])
def test_lease_timings_must_decrease(render_error: Callable[..., str],
                                     timings: dict[str, str]) -> None:
    error = render_error({"leaderElection": timings})
    assert "leaseDuration" in error and "> renewDeadline" in error and "is required" in error


def test_kubeconfig_secret_refuses_crds_in_the_host(render_error: Callable[..., str]) -> None:
    error = render_error({"kubeconfigSecret": {"name": "kc", "key": "kubeconfig"}})
    assert "set crds.enabled=false" in error, error


# --- metrics ---------------------------------------------------------------------------

def test_metrics_service_selects_the_pods(render: Render, chart: str) -> None:
    documents = render()
    service = chartkit.one(documents, "Service", f"{_release(chart)}-metrics")
    pod_labels = chartkit.one(documents, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"] == [{"name": "metrics", "port": PORTS[chart],
                                         "targetPort": "metrics", "protocol": "TCP"}]


def test_service_monitor_disabled_by_default(render: Render) -> None:
    assert not [d for d in render() if d["apiVersion"] == MONITORING]
