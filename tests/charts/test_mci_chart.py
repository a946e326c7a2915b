"""The clusterhealth-mci-provider chart: what it renders, what it refuses, and least privilege.

What it renders like the other controllers' charts (the Deployment's shape, the
PodDisruptionBudget, image and metrics values) is tested in ``test_controller_charts.py``.

Every manifest is validated with kubernetes-validate (strict, the project's
Kubernetes version) except the monitoring.coreos.com ServiceMonitor, which it
has no schema for: its structure is checked here instead.

The HAProxy sidecar's ``haproxy.cfg`` is rendered by a Helm template; it must
be exactly what ``clusterhealth_mci.providers.haproxy.config.render`` writes
for the same parameters, because the provider drives that layout through the
runtime API. The comparison imports the provider's module and fails (it is
never skipped) if the module is missing.
"""

from __future__ import annotations

import importlib
import json
import pathlib
import shutil
import subprocess
from collections.abc import Callable
from types import ModuleType
from typing import Any

import chartkit
import kubernetes_validate
import pytest
import yaml

from clusterhealth_core import settings as core_settings
from clusterhealth_localenv import binaries, environment

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "mci-provider"
KUBERNETES = binaries.KUBERNETES_VERSION.lstrip("v")
NAMESPACE = "clusterhealth-system"
RELEASE = "clusterhealth-mci-provider"
MONITORING = "monitoring.coreos.com/v1"
OWN = {"enabled": False}
"""``haproxy.sidecar``: the user's own HAProxy, not the chart's sidecar (the default)."""
KARMADA_HOST = {"kubeconfigSecret": {"name": "karmada-kubeconfig", "key": "config"},
                "crds": {"enabled": False}, "haproxy": {"sidecar": OWN}}
SIDECAR = {"haproxy": {"sidecar": {"enabled": True}}}
MEMBER = {"target": "member", "crds": {"enabled": False}}
SOCKET_DIR = "/var/run/haproxy"
CONFIG_MODULE = "clusterhealth_mci.providers.haproxy.config"

Manifest = chartkit.Manifest
Render = chartkit.Render


_run_helm = chartkit.run_helm


_one = chartkit.one


_kinds = chartkit.kinds


def _pod(documents: list[Manifest]) -> Manifest:
    pod: Manifest = _one(documents, "Deployment")["spec"]["template"]["spec"]
    return pod


def _containers(documents: list[Manifest]) -> dict[str, Manifest]:
    return {c["name"]: c for c in _pod(documents)["containers"]}


def _container(documents: list[Manifest]) -> Manifest:
    containers = _containers(documents)
    assert list(containers) in (["mci-provider"], ["mci-provider", "haproxy"])
    return containers["mci-provider"]


def _validate(documents: list[Manifest]) -> None:
    for document in documents:
        if document["apiVersion"] != MONITORING:
            kubernetes_validate.validate(document, KUBERNETES, strict=True)


def _config_module() -> ModuleType:
    """The provider's haproxy.cfg renderer; a clear failure (not a skip) while it is missing."""
    try:
        return importlib.import_module(CONFIG_MODULE)
    except ImportError as exc:
        pytest.fail(f"{CONFIG_MODULE} cannot be imported ({exc}): the chart's haproxy.cfg "
                    "template must be compared with the provider's renderer, which must exist")


def _controller_parser() -> Any:
    try:
        module = importlib.import_module("clusterhealth_mci.settings")
    except ImportError as exc:
        pytest.fail(f"clusterhealth_mci.settings cannot be imported ({exc}): the chart's "
                    "flags must be checked against the controller's")
    return module.parser()


CONTROL_PLANE_KINDS = ["ClusterRole", "ClusterRoleBinding", "Role", "Role", "RoleBinding",
                       "RoleBinding", "IngressClass"]


# --- the chart itself ------------------------------------------------------------------

def test_schema_closes_every_values_object() -> None:
    # test_charts.py checks the schema is draft-07 and closed at the top; here, below too:
    # every object of values.yaml is closed (but the free-form Kubernetes ones)
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    free_form = {"resources", "nodeSelector", "affinity", "podSecurityContext",
                 "securityContext", "socketVolume", "labels", "annotations", "global",
                 "podSelector"}

    def closed(node: dict[str, Any], value: Any, where: str) -> None:
        if not isinstance(value, dict) or where.rsplit("/", 1)[-1] in free_form:
            return
        if "$ref" in node:
            node = schema["definitions"][node["$ref"].rsplit("/", 1)[-1]]
        assert node.get("additionalProperties") is False, where
        for key, child in value.items():
            closed(node["properties"][key], child, f"{where}/{key}")

    for key, value in values.items():
        closed(schema["properties"][key], value, key)


def test_defaults_render_valid_manifests(render: Render) -> None:
    documents = render()
    assert _kinds(documents) == sorted([
        "ServiceAccount", *CONTROL_PLANE_KINDS, "Service", "Deployment",
        "PodDisruptionBudget", "NetworkPolicy",
        "ConfigMap", "Service",  # the HAProxy sidecar's (the default)
    ])
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES, strict=True)
    for document in documents:
        labels = document["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "clusterhealth-mci-provider"
        assert labels["app.kubernetes.io/part-of"] == "clusterhealth"
        assert labels["app.kubernetes.io/component"] == "mci-controller"


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
    # the HAProxy sidecar (the default): its config rolls the pods
    assert set(deployment["spec"]["template"]["metadata"]["annotations"]) == {
        "checksum/haproxy-config"}
    pod = _pod(documents)
    assert pod["serviceAccountName"] == RELEASE
    assert pod["automountServiceAccountToken"] is True
    assert not {"nodeSelector", "tolerations", "priorityClassName"} & set(pod)
    assert list(_containers(documents)) == ["mci-provider", "haproxy"]
    container = _container(documents)
    assert container["image"] == "clusterhealth:0.1.0"
    assert _containers(documents)["haproxy"]["image"] == "clusterhealth-haproxy:0.1.0"
    assert container["command"] == ["python", "-m", "clusterhealth_mci"]


def test_deployment_args(render: Render) -> None:
    assert _container(render())["args"] == [
        "--provider=haproxy",
        "--ingress-class=clusterhealth",
        "--default-class=false",
        "--haproxy-socket=/var/run/haproxy/admin.sock",
        "--haproxy-slots=256",
        "--haproxy-servers-per-slot=32",
        "--drain-timeout=30s",
        "--haproxy-monitor-interval=1s",
        # every replica programs its own sidecar; the frontend's port in the status
        "--standby-programs=true",
        "--haproxy-bind-port=8080",
        "--fail-open=true",
        "--resync-period=5m",
        "--workers=2",
        "--member-credentials=readonly",
        "--member-secret-namespace=clusterhealth-mci-credentials",
        "--cluster-secret-namespace=karmada-cluster",
        "--healthz-port=10360",
        "--leader-elect=true",
        "--leader-elect-lease-duration=15s",
        "--leader-elect-renew-deadline=10s",
        "--leader-elect-retry-period=2s",
        f"--leader-elect-resource-name={RELEASE}",
        f"--leader-elect-resource-namespace={NAMESPACE}",
    ]


def test_deployment_args_follow_values(render: Render) -> None:
    args = _container(render({
        "ingressClass": {"name": "edge.example.org", "default": True},
        "haproxy": {"socket": "10.0.0.7:9999", "slots": 4096, "serversPerSlot": 1024,
                    "drainTimeout": "2m", "monitorInterval": "750ms", "sidecar": OWN},
        "failOpen": False, "resyncPeriod": "90s", "workers": 8,
        "clusterSecretNamespace": "member-credentials",
        "memberCredentials": {"mode": "cluster", "namespace": "mci-readers"},
        "leaderElection": {"leaseDuration": "1m", "renewDeadline": "40.5s",
                           "retryPeriod": "500ms"},
        "extraArgs": ["--bind-address=127.0.0.1", "--context=karmada"],
    }))["args"]
    for expected in ("--ingress-class=edge.example.org", "--default-class=true",
                     "--haproxy-socket=10.0.0.7:9999", "--haproxy-slots=4096",
                     "--haproxy-servers-per-slot=1024", "--drain-timeout=2m",
                     "--haproxy-monitor-interval=750ms",
                     "--cluster-secret-namespace=member-credentials", "--fail-open=false",
                     "--member-credentials=cluster", "--member-secret-namespace=mci-readers",
                     "--resync-period=90s", "--workers=8",
                     "--leader-elect-lease-duration=1m", "--leader-elect-renew-deadline=40.5s",
                     "--leader-elect-retry-period=500ms"):
        assert expected in args
    assert args[-2:] == ["--bind-address=127.0.0.1", "--context=karmada"]
    assert not [a for a in args if a.startswith(("--kubeconfig", "--standby-programs"))]


def test_fake_provider_gets_no_haproxy_flags(render: Render) -> None:
    documents = render({"provider": "fake"})
    args = _container(documents)["args"]
    assert args[0] == "--provider=fake"
    assert not [a for a in args if a.startswith(("--haproxy-", "--drain-timeout"))]
    assert [v["name"] for v in _pod(documents)["volumes"]] == ["tmp"]


@pytest.mark.parametrize("values", [
    None, {"provider": "fake"}, {"ingressClass": {"default": True}}, SIDECAR,
    {"haproxy": {"socket": "ipv4@127.0.0.1:9999", "sidecar": OWN}}, KARMADA_HOST,
])
def test_the_controller_accepts_the_chart_flags(render: Render,
                                                values: dict[str, Any] | None) -> None:
    """Every flag the chart passes is one the controller parses (and validates)."""
    container = _container(render(values))
    assert container["command"] == ["python", "-m", "clusterhealth_mci"]
    parsed = _controller_parser().parse(container["args"], {})
    assert parsed.leader_elect is True
    assert parsed.leader_elect_resource_name == RELEASE
    assert parsed.healthz_port == 10360


def test_values_defaults_are_the_controller_defaults() -> None:
    """The chart's defaults are the controller's, so the README's defaults hold either way."""
    defaults = _controller_parser().parse([], {})
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["provider"] == defaults.provider
    assert values["ingressClass"]["name"] == defaults.ingress_class
    assert values["haproxy"]["socket"] == defaults.haproxy_socket
    assert values["haproxy"]["slots"] == defaults.haproxy_slots
    assert values["haproxy"]["serversPerSlot"] == defaults.haproxy_servers_per_slot
    assert core_settings.duration(values["haproxy"]["drainTimeout"]) == defaults.drain_timeout
    assert core_settings.duration(values["haproxy"]["monitorInterval"]) == \
        defaults.haproxy_monitor_interval
    assert values["clusterSecretNamespace"] == defaults.cluster_secret_namespace
    assert values["memberCredentials"] == {"mode": defaults.member_credentials,
                                           "namespace": defaults.member_secret_namespace}
    assert values["failOpen"] is defaults.fail_open
    assert core_settings.duration(values["resyncPeriod"]) == defaults.resync_period
    assert values["workers"] == defaults.workers
    assert defaults.healthz_port == 10360


RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


# --- IngressClass ----------------------------------------------------------------------

def test_ingress_class_defaults(render: Render) -> None:
    documents = render()
    ingress_class = _one(documents, "IngressClass")
    assert ingress_class["apiVersion"] == "networking.k8s.io/v1"
    assert ingress_class["metadata"]["name"] == "clusterhealth"
    assert "namespace" not in ingress_class["metadata"]  # cluster-scoped
    assert "annotations" not in ingress_class["metadata"]
    assert ingress_class["spec"] == {"controller": "clusterhealth.io/mci-provider"}
    args = _container(documents)["args"]
    assert "--ingress-class=clusterhealth" in args
    assert "--default-class=false" in args


def test_ingress_class_default_and_name(render: Render) -> None:
    documents = render({"ingressClass": {"name": "global-lb", "default": True}})
    ingress_class = _one(documents, "IngressClass", "global-lb")
    assert ingress_class["metadata"]["annotations"] == {
        "ingressclass.kubernetes.io/is-default-class": "true"}
    assert ingress_class["spec"] == {"controller": "clusterhealth.io/mci-provider"}
    args = _container(documents)["args"]
    assert "--ingress-class=global-lb" in args
    assert "--default-class=true" in args


def test_ingress_class_lives_with_the_rbac(render: Render) -> None:
    """It belongs in the API server the controller manages, like the RBAC."""
    assert "IngressClass" not in _kinds(render(KARMADA_HOST))
    assert "IngressClass" in _kinds(render({"rbacOnly": True, "crds": {"enabled": False}}))
    assert "IngressClass" not in _kinds(render(MEMBER))


# --- where the provider finds HAProxy's admin socket -----------------------------------

def test_tcp_socket_needs_no_volume(render: Render) -> None:
    documents = render({"haproxy": {"socket": "haproxy.ingress.svc:9999", "sidecar": OWN}})
    assert "--haproxy-socket=haproxy.ingress.svc:9999" in _container(documents)["args"]
    assert [v["name"] for v in _pod(documents)["volumes"]] == ["tmp"]


@pytest.mark.parametrize(("socket", "directory"), [
    ("/run/haproxy/admin.sock", "/run/haproxy"),
    ("unix@/var/lib/haproxy/stats", "/var/lib/haproxy"),
])
def test_socket_volume_mounted_at_the_socket_directory(render: Render, socket: str,
                                                       directory: str) -> None:
    volume = {"hostPath": {"path": "/run/haproxy", "type": "Directory"}}
    documents = render({"haproxy": {"socket": socket, "socketVolume": volume, "sidecar": OWN}})
    container = _container(documents)
    assert f"--haproxy-socket={socket}" in container["args"]
    assert {"name": "haproxy-socket", "mountPath": directory} in container["volumeMounts"]
    assert {"name": "haproxy-socket", **volume} in _pod(documents)["volumes"]
    _validate(documents)


def test_socket_volume_needs_a_unix_socket(render_error: Callable[..., str]) -> None:
    error = render_error({"haproxy": {"socket": "10.0.0.1:9999", "sidecar": OWN,
                                      "socketVolume": {"emptyDir": {}}}})
    assert "haproxy.socketVolume is for a UNIX socket" in error, error


# --- the HAProxy sidecar ---------------------------------------------------------------

def test_sidecar_container_shares_the_socket_directory(render: Render) -> None:
    documents = render(SIDECAR)
    _validate(documents)
    containers = _containers(documents)
    assert list(containers) == ["mci-provider", "haproxy"]
    haproxy = containers["haproxy"]
    assert haproxy["image"] == "clusterhealth-haproxy:0.1.0"
    assert haproxy["imagePullPolicy"] == "IfNotPresent"
    assert haproxy["command"] == ["haproxy", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
    assert haproxy["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert haproxy["readinessProbe"]["tcpSocket"] == {"port": "http"}
    assert haproxy["livenessProbe"]["tcpSocket"] == {"port": "http"}
    assert haproxy["securityContext"] == RESTRICTED_CONTAINER
    assert haproxy["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"},
                                    "limits": {"memory": "256Mi"}}
    shared = {"name": "haproxy-socket", "mountPath": SOCKET_DIR}
    assert shared in haproxy["volumeMounts"]
    assert shared in containers["mci-provider"]["volumeMounts"]
    assert "--haproxy-socket=/var/run/haproxy/admin.sock" in containers["mci-provider"]["args"]
    volumes = {v["name"]: v for v in _pod(documents)["volumes"]}
    assert volumes["haproxy-socket"] == {"name": "haproxy-socket",
                                         "emptyDir": {"sizeLimit": "1Mi"}}
    # the controller never sees HAProxy's config; HAProxy never sees /tmp
    assert {m["name"] for m in containers["mci-provider"]["volumeMounts"]} == {
        "haproxy-socket", "tmp"}
    assert {m["name"] for m in haproxy["volumeMounts"]} == {
        "haproxy-config", "haproxy-maps", "haproxy-socket"}


def test_sidecar_config_map(render: Render) -> None:
    documents = render(SIDECAR)
    config_map = _one(documents, "ConfigMap", f"{RELEASE}-haproxy")
    assert config_map["metadata"]["namespace"] == NAMESPACE
    assert set(config_map["data"]) == {"haproxy.cfg", "exact.map", "prefix.map", "slots.map"}
    assert config_map["data"]["exact.map"] == config_map["data"]["slots.map"] == ""
    volumes = {v["name"]: v for v in _pod(documents)["volumes"]}
    assert volumes["haproxy-config"]["configMap"] == {
        "name": f"{RELEASE}-haproxy", "items": [{"key": "haproxy.cfg", "path": "haproxy.cfg"}]}
    assert volumes["haproxy-maps"]["configMap"] == {
        "name": f"{RELEASE}-haproxy",
        "items": [{"key": k, "path": k} for k in ("exact.map", "prefix.map", "slots.map")]}
    mounts = {m["name"]: m for m in _containers(documents)["haproxy"]["volumeMounts"]}
    assert mounts["haproxy-config"] == {"name": "haproxy-config", "readOnly": True,
                                        "mountPath": "/usr/local/etc/haproxy"}
    # the provider names the maps by the path its layout gives them
    layout = _config_module().HAProxyLayout()
    assert mounts["haproxy-maps"] == {"name": "haproxy-maps", "readOnly": True,
                                      "mountPath": layout.map_dir}
    assert sorted(f"{layout.map_dir}/{k}" for k in config_map["data"] if k.endswith(".map")) \
        == sorted(layout.map_files)


def test_sidecar_service(render: Render) -> None:
    documents = render({**SIDECAR, "haproxy": {"sidecar": {"enabled": True,
                                                           "frontendPort": 8443}}})
    service = _one(documents, "Service", f"{RELEASE}-haproxy")
    pod_labels = _one(documents, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert "clusterIP" not in service["spec"]
    assert service["spec"]["ports"] == [{"name": "http", "port": 8443, "targetPort": "http",
                                         "protocol": "TCP"}]
    assert _containers(documents)["haproxy"]["ports"][0]["containerPort"] == 8443


def test_sidecar_config_change_rolls_the_pods(render: Render) -> None:
    def checksum(slots: int) -> str:
        documents = render({**SIDECAR, "haproxy": {"slots": slots,
                                                   "sidecar": {"enabled": True}}})
        annotations = _one(documents, "Deployment")["spec"]["template"]["metadata"][
            "annotations"]
        value: str = annotations["checksum/haproxy-config"]
        return value

    assert checksum(8) == checksum(8)
    assert checksum(8) != checksum(9)


def test_sidecar_values(render: Render) -> None:
    resources = {"requests": {"cpu": "1", "memory": "128Mi"}, "limits": {"memory": "1Gi"}}
    documents = render({"haproxy": {"sidecar": {
        "image": {"registry": "registry.example.org/lb", "repository": "haproxy", "tag": "2.6.12",
                  "pullPolicy": "Always"}, "resources": resources}}})
    haproxy = _containers(documents)["haproxy"]
    assert haproxy["image"] == "registry.example.org/lb/haproxy:2.6.12"
    assert haproxy["imagePullPolicy"] == "Always"
    assert haproxy["resources"] == resources


@pytest.mark.parametrize("values", [{"haproxy": {"sidecar": OWN}}, {"provider": "fake"}])
def test_no_sidecar_with_an_own_haproxy_or_another_provider(render: Render,
                                                             values: dict[str, Any]) -> None:
    documents = render(values)
    assert "ConfigMap" not in _kinds(documents)
    assert not [d for d in documents if d["metadata"]["name"].endswith("-haproxy")]
    assert list(_containers(documents)) == ["mci-provider"]
    assert not [a for a in _container(documents)["args"] if a.startswith("--standby")]


def test_sidecar_keeps_two_replicas(render: Render) -> None:
    """Each pod's HAProxy is programmed by its own controller: high availability by default."""
    documents = render()
    assert _one(documents, "Deployment")["spec"]["replicas"] == 2
    assert _one(documents, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    args = _container(documents)["args"]
    assert "--standby-programs=true" in args and "--leader-elect=true" in args
    # the Service sends clients to every Ready pod's HAProxy
    service = _one([d for d in documents if d["metadata"]["name"].endswith("-haproxy")],
                   "Service")
    assert service["spec"]["selector"] == _one(documents, "Deployment")["spec"]["selector"][
        "matchLabels"]


@pytest.mark.parametrize(("values", "message"), [
    ({"haproxy": {"socket": "/run/haproxy.sock"}},
     "haproxy.socket must be a UNIX socket in /var/run/haproxy"),
    ({"haproxy": {"socket": "127.0.0.1:9999", "sidecar": {"enabled": True}}},
     "to drive your own HAProxy, set haproxy.sidecar.enabled=false"),
    ({"haproxy": {"socketVolume": {"emptyDir": {}}, "sidecar": {"enabled": True}}},
     "leave haproxy.socketVolume empty"),
])
def test_sidecar_refuses(render_error: Callable[..., str], values: dict[str, Any],
                         message: str) -> None:
    error = render_error(values)
    assert message in error, error


# --- the sidecar's haproxy.cfg is the provider's layout --------------------------------

def _chart_haproxy_cfg(render: Render, slots: int, servers: int, port: int,
                       socket: str) -> str:
    documents = render({"haproxy": {
        "socket": socket, "slots": slots, "serversPerSlot": servers,
        "sidecar": {"enabled": True, "frontendPort": port}}})
    text: str = _one(documents, "ConfigMap")["data"]["haproxy.cfg"]
    return text


@pytest.mark.parametrize(("slots", "servers", "port", "socket"), [
    (256, 32, 8080, "/var/run/haproxy/admin.sock"),  # the defaults
    (1, 1, 1024, "/var/run/haproxy/runtime.sock"),
    (17, 5, 9000, "unix@/var/run/haproxy/admin.sock"),
    (4096, 1024, 65535, "/var/run/haproxy/admin.sock"),  # the schema's maxima
])
def test_sidecar_haproxy_cfg_is_the_providers_layout(render: Render, slots: int,
                                                     servers: int, port: int,
                                                     socket: str) -> None:
    config = _config_module()
    expected = config.render(config.HAProxyLayout(
        bind_port=port, admin_socket=socket, slots=slots, servers_per_slot=servers))
    rendered = _chart_haproxy_cfg(render, slots, servers, port, socket)
    if rendered != expected:  # the first difference, readably
        for number, (ours, theirs) in enumerate(
                zip(rendered.splitlines(), expected.splitlines(), strict=False), 1):
            assert ours == theirs, f"haproxy.cfg line {number}: chart != {CONFIG_MODULE}"
    assert rendered == expected


def test_sidecar_haproxy_cfg_is_accepted_by_haproxy(render: Render,
                                                    tmp_path: pathlib.Path) -> None:
    """``haproxy -c`` on the chart's config (map and socket paths moved into tmp_path)."""
    binary = shutil.which("haproxy")
    assert binary, "haproxy is not installed (scripts/bootstrap.sh installs it)"
    layout = _config_module().HAProxyLayout()
    text = _chart_haproxy_cfg(render, 4, 2, 8080, f"{SOCKET_DIR}/admin.sock")
    maps = tmp_path / "maps"
    maps.mkdir()
    for name in ("exact.map", "prefix.map", "slots.map"):
        (maps / name).write_text("")
    assert layout.map_dir in text and SOCKET_DIR in text
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(text.replace(layout.map_dir, str(maps)).replace(SOCKET_DIR, str(tmp_path)))
    proc = subprocess.run([binary, "-c", "-f", str(cfg)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- values that are refused -----------------------------------------------------------

@pytest.mark.parametrize("item", ["replicas=0", "provider=nginx", "haproxy.slots=5000",
                                  "haproxy.serversPerSlot=0", "haproxy.drainTimeout=30",
                                  "foo=bar"])
def test_schema_rejects_bad_values_given_with_set(render_error: Callable[..., str],
                                                  item: str) -> None:
    assert "don't meet the specifications of the schema" in render_error(None, item)


@pytest.mark.parametrize("socket", [
    "/var/run/haproxy/admin.sock", "unix@/run/haproxy.sock", "127.0.0.1:9999",
    "ipv4@10.0.0.1:9999", "[fd00::1]:9999", "haproxy.ingress.svc.cluster.local:9999",
])
def test_schema_accepts_sockets(render: Render, socket: str) -> None:
    assert f"--haproxy-socket={socket}" in _container(
        render({"haproxy": {"socket": socket, "sidecar": OWN}}))["args"]


# --- RBAC in the control plane ---------------------------------------------------------

Grant = tuple[str, str, str, str, tuple[str, ...]]


def _rules(documents: list[Manifest]) -> list[tuple[str, str, str, Manifest]]:
    return [(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"], rule)
            for d in documents if d["kind"] in ("Role", "ClusterRole") for rule in d["rules"]]


def _granted(documents: list[Manifest]) -> set[Grant]:
    return {(namespace, group, resource, verb, tuple(rule.get("resourceNames", [])))
            for _, namespace, _, rule in _rules(documents) for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def _expected_grants(secret_namespace: str = "clusterhealth-mci-credentials", lease: str = RELEASE,
                     namespace: str = NAMESPACE) -> set[Grant]:
    read = ("get", "list", "watch")
    return {
        *(("", "networking.karmada.io", "multiclusteringresses", v, ()) for v in read),
        ("", "networking.karmada.io", "multiclusteringresses", "patch", ()),  # the finalizer
        ("", "networking.karmada.io", "multiclusteringresses/status", "patch", ()),
        ("", "networking.karmada.io", "multiclusteringresses/status", "update", ()),
        *(("", "cluster.karmada.io", "clusters", v, ()) for v in read),
        *(("", "work.karmada.io", "resourcebindings", v, ()) for v in read),
        *(("", "networking.k8s.io", "ingressclasses", v, ()) for v in read),
        ("", "", "events", "create", ()),
        ("", "", "events", "patch", ()),
        *((secret_namespace, "", "secrets", v, ()) for v in read),
        (namespace, "coordination.k8s.io", "leases", "create", ()),
        (namespace, "coordination.k8s.io", "leases", "get", (lease,)),
        (namespace, "coordination.k8s.io", "leases", "update", (lease,)),
        (namespace, "coordination.k8s.io", "leases", "watch", (lease,)),
    }


def _assert_no_broad_grants(documents: list[Manifest]) -> None:
    for kind, namespace, name, rule in _rules(documents):
        where = f"{kind} {namespace}/{name}"
        assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, where
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(field, []), f"wildcard {field} in {where}"
            assert not any("*" in item for item in rule.get(field, [])), where
        assert not {"delete", "deletecollection", "escalate", "bind", "impersonate"} \
            & set(rule["verbs"]), where
        # update: only the Lease, and the MCI status where a read-modify-write is needed
        assert "update" not in rule["verbs"] or rule["resources"] in (
            ["leases"], ["multiclusteringresses/status"]), where


@pytest.mark.parametrize(("values", "secret_namespace"), [
    ({}, "clusterhealth-mci-credentials"),  # its own read-only member credentials only
    ({"memberCredentials": {"mode": "readonly", "namespace": "readers"},
      "clusterSecretNamespace": "ignored"}, "readers"),
    ({"memberCredentials": {"mode": "cluster", "namespace": "ignored"}}, "karmada-cluster"),
    ({"memberCredentials": {"mode": "cluster", "namespace": "ignored"},
      "clusterSecretNamespace": NAMESPACE}, NAMESPACE),
])
def test_rbac_is_exactly_least_privilege(render: Render, values: dict[str, Any],
                                         secret_namespace: str) -> None:
    documents = render(values)
    _assert_no_broad_grants(documents)
    assert _granted(documents) == _expected_grants(secret_namespace)
    # Secrets only through the Role in one namespace, never cluster-wide; by default not
    # where the Clusters' own (read-write) credentials are
    for kind, namespace, _, rule in _rules(documents):
        if "secrets" in rule["resources"]:
            assert (kind, namespace) == ("Role", secret_namespace)
            assert rule["verbs"] == ["get", "list", "watch"]
    for kind, namespace, _, _ in _rules(documents):
        assert (kind == "ClusterRole") == (namespace == "")


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
    secrets_role = _one(documents, "Role", f"{RELEASE}-member-credentials")
    assert secrets_role["metadata"]["namespace"] == "clusterhealth-mci-credentials"
    assert f"--member-secret-namespace={secrets_role['metadata']['namespace']}" in args
    cluster_mode = render({"memberCredentials": {"mode": "cluster",
                                                 "namespace": "clusterhealth-mci-credentials"}})
    secrets_role = _one(cluster_mode, "Role", f"{RELEASE}-cluster-secrets")
    assert secrets_role["metadata"]["namespace"] == "karmada-cluster"
    assert "--member-credentials=cluster" in _container(cluster_mode)["args"]


# --- target=member: the member-side RBAC only ------------------------------------------

MEMBER_RULES = [
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
     "verbs": ["get", "list", "watch"]},
]


def test_member_target_renders_only_its_read_only_identity(render: Render) -> None:
    documents = render({**MEMBER, "replicas": 1, "serviceMonitor": {"enabled": True},
                        "ingressClass": {"default": True},
                        "haproxy": {"sidecar": {"enabled": True}}})
    assert _kinds(documents) == ["ClusterRole", "ClusterRoleBinding", "Secret",
                                 "ServiceAccount"]
    _validate(documents)
    _assert_no_broad_grants(documents)
    role = _one(documents, "ClusterRole", RELEASE)
    assert role["rules"] == MEMBER_RULES
    # the local environment gives every member the same identity (its MCI tests use it)
    assert list(environment.MCI_READER_RULES) == MEMBER_RULES
    account = _one(documents, "ServiceAccount", RELEASE)
    assert account["metadata"]["namespace"] == NAMESPACE
    assert account["automountServiceAccountToken"] is False
    token = _one(documents, "Secret", f"{RELEASE}-token")
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"] == {"kubernetes.io/service-account.name": RELEASE}
    binding = _one(documents, "ClusterRoleBinding", RELEASE)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": RELEASE}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE,
                                    "namespace": NAMESPACE}]
    # and no CRDs in a member
    assert chartkit.crd_names(render(MEMBER, include_crds=True)) == []


@pytest.mark.parametrize(("subject", "expected"), [
    ({"kind": "User", "name": "system:serviceaccount:karmada-cluster:karmada-member1"},
     {"kind": "User", "name": "system:serviceaccount:karmada-cluster:karmada-member1",
      "apiGroup": "rbac.authorization.k8s.io"}),
    ({"kind": "Group", "name": "mci-readers"},
     {"kind": "Group", "name": "mci-readers", "apiGroup": "rbac.authorization.k8s.io"}),
    ({"kind": "ServiceAccount", "name": "karmada-member1", "namespace": "karmada-cluster"},
     {"kind": "ServiceAccount", "name": "karmada-member1", "namespace": "karmada-cluster"}),
])
def test_member_subject(render: Render, subject: dict[str, str],
                        expected: dict[str, str]) -> None:
    documents = render({**MEMBER, "member": {"serviceAccount": {"create": False},
                                             "subject": subject}})
    assert _one(documents, "ClusterRoleBinding")["subjects"] == [expected]
    assert _kinds(documents) == ["ClusterRole", "ClusterRoleBinding"]


@pytest.mark.parametrize(("subject", "message"), [
    ({"kind": "ServiceAccount", "name": "a", "namespace": ""},
     "member.subject.namespace is required"),
    ({"kind": "User", "name": ""}, "member.subject.name is required"),
])
def test_member_subject_must_be_complete(render_error: Callable[..., str],
                                         subject: dict[str, str], message: str) -> None:
    assert message in render_error({**MEMBER, "member": {"serviceAccount": {"create": False},
                                                         "subject": subject}})


def test_member_target_refuses_the_crds(render_error: Callable[..., str]) -> None:
    error = render_error({"target": "member"})
    assert "target=member" in error and "set crds.enabled=false" in error, error


# --- kubeconfigSecret: a host cluster managing another API server (Karmada) ------------

def test_kubeconfig_secret_mounted_and_passed(render: Render) -> None:
    documents = render(KARMADA_HOST)
    container = _container(documents)
    pod = _pod(documents)
    assert container["args"][0] == "--kubeconfig=/etc/clusterhealth/kubeconfig/config"
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert set(mounts) == set(volumes) == {"kubeconfig", "tmp"}
    assert mounts["kubeconfig"] == {"name": "kubeconfig",
                                    "mountPath": "/etc/clusterhealth/kubeconfig",
                                    "readOnly": True}
    assert volumes["kubeconfig"]["secret"] == {
        "secretName": "karmada-kubeconfig", "defaultMode": 0o440,
        "items": [{"key": "config", "path": "config"}]}
    # nothing of the host's API server: no token, no RBAC, no IngressClass, no CRDs
    assert pod["automountServiceAccountToken"] is False
    assert _one(documents, "ServiceAccount")["automountServiceAccountToken"] is False
    assert _kinds(documents) == sorted(["ServiceAccount", "Service", "Deployment",
                                        "PodDisruptionBudget", "NetworkPolicy"])
    assert chartkit.crd_names(render(KARMADA_HOST, include_crds=True)) == []
    _validate(documents)


def test_rbac_only(render: Render) -> None:
    documents = render({"rbacOnly": True, "crds": {"enabled": False},
                        "serviceMonitor": {"enabled": True}})
    assert _kinds(documents) == sorted(["ServiceAccount", *CONTROL_PLANE_KINDS])
    assert _granted(documents) == _expected_grants()
    _validate(documents)
    # the same names as the host install with the same release name and namespace
    host = render(KARMADA_HOST)
    assert _one(documents, "ServiceAccount")["metadata"]["name"] == \
        _one(host, "ServiceAccount")["metadata"]["name"] == RELEASE
    args = _container(host)["args"]
    assert f"--leader-elect-resource-name={RELEASE}" in args
    assert f"--leader-elect-resource-namespace={NAMESPACE}" in args
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
    (service,) = [d for d in documents if d["kind"] == "Service"
                  and d["metadata"]["name"] == f"{RELEASE}-metrics"]
    assert monitor["spec"]["selector"]["matchLabels"].items() \
        <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics",
                                             "interval": "15s", "honorLabels": True}]


# --- the README documents what the chart does -----------------------------------------

def test_readme_documents_values_metrics_and_behaviour() -> None:
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for key in values:
        assert f"`{key}" in readme, key
    for key in values["haproxy"]:
        assert f"haproxy.{key}" in readme, key
    for key in values["haproxy"]["sidecar"]:
        assert f"haproxy.sidecar.{key}" in readme, key
    for metric in ("clusterhealth_mci_blocked_clusters{mci}",
                   "clusterhealth_mci_backends{mci,cluster}",
                   "clusterhealth_mci_provider_call_duration_seconds{provider,operation}",
                   "clusterhealth_mci_provider_errors_total{provider,operation}",
                   "clusterhealth_mci_fail_open{mci}",
                   "clusterhealth_mci_is_leader"):
        assert metric in readme, metric
    for text in ("--set crds.enabled=false", "--set target=member", "--fail-open=false",
                 "endpointslices", "karmada-cluster", "clusterhealth.io/mci-provider",
                 CONFIG_MODULE):
        assert text in readme, text
