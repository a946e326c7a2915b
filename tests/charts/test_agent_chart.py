"""The clusterhealth-agent chart: what it renders, what it refuses, and least privilege.

Every manifest is validated with kubernetes-validate (strict, the project's
Kubernetes version) except the monitoring.coreos.com kinds, which it has no
schema for: their structure is checked here instead.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import chartkit
import kubernetes_validate
import pytest
import yaml

from clusterhealth_localenv import binaries

CHART = pathlib.Path(__file__).resolve().parents[2] / "charts" / "agent"
KUBERNETES = binaries.KUBERNETES_VERSION.lstrip("v")
NAMESPACE = "clusterhealth-system"
RELEASE = "clusterhealth-agent"
MONITORING = "monitoring.coreos.com/v1"

Manifest = chartkit.Manifest
Render = chartkit.Render


_one = chartkit.one


_kinds = chartkit.kinds


def _container(documents: list[Manifest]) -> Manifest:
    pod = _one(documents, "DaemonSet")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["agent"]
    container: Manifest = pod["containers"][0]
    return container


def _alerts_file() -> Manifest:
    loaded: Manifest = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    return loaded


MEMBER = {"clusterName": "member1"}


# --- the generic chart checks (tests/charts/test_charts.py), with values -----------------

def test_member_defaults_render_valid_manifests(render: Render) -> None:
    documents = render(MEMBER)
    assert _kinds(documents) == sorted([
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
        "Service", "DaemonSet", "NetworkPolicy",
    ])
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES, strict=True)


# --- the DaemonSet ---------------------------------------------------------------------

def test_daemonset_args(render: Render) -> None:
    assert _container(render(MEMBER))["args"] == [
        "--cluster-name=member1",
        "--karmada-kubeconfig=/etc/clusterhealth/karmada/kubeconfig",
        "--detectors=dns",
        "--detect-period=5s",
        "--detect-failure-threshold=30s",
        "--detect-success-threshold=30s",
        "--stale-threshold=60s",
        "--failure-quorum=1",
        "--healthz-port=10358",
        "--leader-elect=true",
        f"--leader-elect-resource-name={RELEASE}",
        f"--leader-elect-resource-namespace={NAMESPACE}",
    ]


def test_daemonset_args_follow_values(render: Render) -> None:
    container = _container(render({
        **MEMBER,
        "detectors": ["dns", "kube-proxy", "apiserver", "coredns"],
        "detectPeriod": "2s", "detectFailureThreshold": "1m",
        "detectSuccessThreshold": "1.5m", "staleThreshold": "500ms",
        "failureQuorum": 0.5,
        "karmadaKubeconfig": {"secretName": "cp", "key": "config.yaml", "context": "karmada"},
        "extraArgs": ["--cluster-domain=example.org", "--nameserver=10.0.0.10:53"],
    }))
    args = container["args"]
    for expected in ("--detectors=dns,kube-proxy,apiserver,coredns", "--detect-period=2s",
                     "--detect-failure-threshold=1m", "--detect-success-threshold=1.5m",
                     "--stale-threshold=500ms", "--failure-quorum=0.5",
                     "--karmada-kubeconfig=/etc/clusterhealth/karmada/config.yaml",
                     "--karmada-context=karmada"):
        assert expected in args
    assert args[-2:] == ["--cluster-domain=example.org", "--nameserver=10.0.0.10:53"]
    assert "--karmada-context=karmada" not in _container(render(MEMBER))["args"]


def test_daemonset_env_from_downward_api(render: Render) -> None:
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
           for e in _container(render(MEMBER))["env"]}
    assert env == {"NODE_NAME": "spec.nodeName", "NODE_IP": "status.hostIP",
                   "POD_NAMESPACE": "metadata.namespace"}


def test_daemonset_runs_everywhere_on_pod_network(render: Render) -> None:
    daemonset = _one(render(MEMBER), "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["hostNetwork"] is False
    assert pod["dnsPolicy"] == "ClusterFirst"
    assert pod["automountServiceAccountToken"] is True
    assert pod["serviceAccountName"] == RELEASE
    assert "nodeSelector" not in pod and "affinity" not in pod
    assert "priorityClassName" not in pod
    labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert daemonset["spec"]["selector"]["matchLabels"].items() <= labels.items()

    pod = _one(render({**MEMBER, "nodeSelector": {"kubernetes.io/os": "linux"},
                       "priorityClassName": "system-node-critical"}),
               "DaemonSet")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["priorityClassName"] == "system-node-critical"


def test_daemonset_security_context(render: Render) -> None:
    documents = render(MEMBER)
    pod = _one(documents, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert _container(documents)["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def test_daemonset_resources_and_health_probes(render: Render) -> None:
    container = _container(render(MEMBER))
    assert container["resources"] == {"requests": {"cpu": "10m", "memory": "48Mi"},
                                      "limits": {"memory": "96Mi"}}
    assert container["ports"] == [{"name": "metrics", "containerPort": 10358,
                                   "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_karmada_kubeconfig_secret_mounted_read_only(render: Render) -> None:
    documents = render({**MEMBER, "karmadaKubeconfig": {"secretName": "cp", "key": "kc"}})
    pod = _one(documents, "DaemonSet")["spec"]["template"]["spec"]
    mounts = {m["name"]: m for m in _container(documents)["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert set(mounts) == set(volumes) == {"karmada-kubeconfig", "tmp"}
    assert mounts["karmada-kubeconfig"] == {"name": "karmada-kubeconfig",
                                            "mountPath": "/etc/clusterhealth/karmada",
                                            "readOnly": True}
    secret = volumes["karmada-kubeconfig"]["secret"]
    assert secret["secretName"] == "cp"
    assert secret["items"] == [{"key": "kc", "path": "kc"}]
    assert secret["defaultMode"] == 0o440
    assert "--karmada-kubeconfig=/etc/clusterhealth/karmada/kc" in _container(documents)["args"]
    # /tmp is the only writable path (readOnlyRootFilesystem)
    assert mounts["tmp"]["mountPath"] == "/tmp"
    assert "emptyDir" in volumes["tmp"]


def test_probes_become_a_configmap_and_probe_config(render: Render) -> None:
    documents = render(MEMBER)
    assert not [d for d in documents if d["kind"] == "ConfigMap"]
    assert not [a for a in _container(documents)["args"] if a.startswith("--probe-config")]

    probes = [{"name": "payments-dns", "type": "dns", "conditionType": "PaymentsDNSReady",
               "timeout": "2s", "dns": {"query": "payments.example.org."}},
              {"name": "gateway", "type": "tcp", "conditionType": "example.org/GatewayReachable",
               "tcp": {"host": "10.0.0.5", "port": 443}}]
    documents = render({**MEMBER, "probes": probes})
    configmap = _one(documents, "ConfigMap", f"{RELEASE}-probes")
    assert yaml.safe_load(configmap["data"]["probes.yaml"]) == {"probes": probes}
    container = _container(documents)
    assert "--probe-config=/etc/clusterhealth/probes/probes.yaml" in container["args"]
    assert {"name": "probes", "mountPath": "/etc/clusterhealth/probes",
            "readOnly": True} in container["volumeMounts"]
    pod_template = _one(documents, "DaemonSet")["spec"]["template"]
    assert {"name": "probes", "configMap": {"name": f"{RELEASE}-probes"}} \
        in pod_template["spec"]["volumes"]
    # a change of the probes rolls the pods
    checksum = pod_template["metadata"]["annotations"]["checksum/probes"]
    other = render({**MEMBER, "probes": probes[:1]})
    assert _one(other, "DaemonSet")["spec"]["template"]["metadata"]["annotations"][
        "checksum/probes"] != checksum


def test_metrics_service_selects_the_agent_pods(render: Render) -> None:
    documents = render(MEMBER)
    service = _one(documents, "Service")
    pod_labels = _one(documents, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 10358,
                                         "targetPort": "metrics", "protocol": "TCP"}]


# --- values that are refused -----------------------------------------------------------

@pytest.mark.parametrize("target", ["member", "controlPlane"])
def test_cluster_name_is_required(render_error: Callable[..., str], target: str) -> None:
    for values in ({"target": target}, {"target": target, "clusterName": ""}):
        error = render_error(values)
        assert "clusterName is required" in error, error
        assert "--set clusterName=<name>" in error


def test_schema_rejects_failure_quorum_given_with_set(render_error: Callable[..., str]) -> None:
    # --set passes floats as strings; the schema checks those too.
    assert "/failureQuorum" in render_error(MEMBER, "failureQuorum=1.5")


@pytest.mark.parametrize("quorum", ["0.5", "1", ".25", "1.0"])
def test_schema_accepts_failure_quorum_given_with_set(render: Render, quorum: str) -> None:
    assert f"--failure-quorum={quorum}" in _container(
        render(MEMBER, f"failureQuorum={quorum}"))["args"]


# --- RBAC ------------------------------------------------------------------------------

def _rules(documents: list[Manifest]) -> list[tuple[str, str, str, Manifest]]:
    return [(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"], rule)
            for d in documents if d["kind"] in ("Role", "ClusterRole") for rule in d["rules"]]


def test_control_plane_target_renders_only_its_rbac(render: Render) -> None:
    documents = render({"clusterName": "member1", "target": "controlPlane",
                        "serviceMonitor": {"enabled": True},
                        "prometheusRule": {"enabled": True},
                        "probes": [{"name": "p", "type": "dns", "conditionType": "P"}]})
    assert _kinds(documents) == ["ClusterRole", "ClusterRoleBinding"]
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES, strict=True)
    role = _one(documents, "ClusterRole", "clusterhealth-agent:member1")
    assert role["rules"] == [
        {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters"],
         "resourceNames": ["member1"], "verbs": ["get"]},
        {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters/status"],
         "resourceNames": ["member1"], "verbs": ["patch", "update"]},
    ]
    binding = _one(documents, "ClusterRoleBinding", "clusterhealth-agent:member1")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": "clusterhealth-agent:member1"}
    assert binding["subjects"] == [{"kind": "User", "name": "clusterhealth-agent:member1",
                                    "apiGroup": "rbac.authorization.k8s.io"}]


@pytest.mark.parametrize(("subject", "expected"), [
    ({"kind": "User", "name": "alice"},
     {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}),
    ({"kind": "Group", "name": "agents"},
     {"kind": "Group", "name": "agents", "apiGroup": "rbac.authorization.k8s.io"}),
    ({"kind": "ServiceAccount", "name": "agent-member1", "namespace": "karmada-cluster"},
     {"kind": "ServiceAccount", "name": "agent-member1", "namespace": "karmada-cluster"}),
])
def test_control_plane_subject(render: Render, subject: dict[str, str],
                               expected: dict[str, str]) -> None:
    documents = render({"clusterName": "member1", "target": "controlPlane",
                        "controlPlane": {"subject": subject}})
    assert _one(documents, "ClusterRoleBinding")["subjects"] == [expected]


def test_control_plane_service_account_needs_a_namespace(
        render_error: Callable[..., str]) -> None:
    error = render_error({"clusterName": "member1", "target": "controlPlane",
                          "controlPlane": {"subject": {"kind": "ServiceAccount", "name": "a"}}})
    assert "controlPlane.subject.namespace is required" in error


@pytest.mark.parametrize("detectors", [["dns"], ["dns", "kube-proxy", "apiserver", "coredns"]])
def test_member_rbac_is_least_privilege(render: Render, detectors: list[str]) -> None:
    documents = render({**MEMBER, "detectors": detectors})
    rules = _rules(documents)
    for kind, namespace, name, rule in rules:
        where = f"{kind} {namespace}/{name}"
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(field, []), f"wildcard {field} in {where}"
        assert "secrets" not in rule["resources"], where
        assert not {"delete", "deletecollection", "escalate", "bind", "impersonate"} \
            & set(rule["verbs"]), where
    granted = {(namespace, group, resource, verb, tuple(rule.get("resourceNames", [])))
               for _, namespace, _, rule in rules for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    expected = {
        ("", "", "nodes", "get", ()), ("", "", "nodes", "list", ()),
        ("", "", "nodes", "watch", ()), ("", "", "nodes/status", "patch", ()),
        (NAMESPACE, "coordination.k8s.io", "leases", "create", ()),
        (NAMESPACE, "coordination.k8s.io", "leases", "get", (RELEASE,)),
        (NAMESPACE, "coordination.k8s.io", "leases", "update", (RELEASE,)),
        (NAMESPACE, "coordination.k8s.io", "leases", "watch", (RELEASE,)),
    }
    if "coredns" in detectors:  # only the CoreDNS probe reads kube-system
        expected |= {("kube-system", "", "services", "get", ()),
                     ("kube-system", "", "services", "list", ()),
                     ("kube-system", "discovery.k8s.io", "endpointslices", "get", ()),
                     ("kube-system", "discovery.k8s.io", "endpointslices", "list", ())}
    assert granted == expected


def test_member_rbac_binds_the_daemonset_service_account(render: Render) -> None:
    documents = render({**MEMBER, "detectors": ["coredns"]})
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
             for d in documents if d["kind"] in ("Role", "ClusterRole")}
    bindings = [d for d in documents if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert len(bindings) == len(roles) == 3
    service_account = _one(documents, "ServiceAccount")["metadata"]
    for binding in bindings:
        namespace = binding["metadata"].get("namespace", "")
        assert (binding["roleRef"]["kind"], namespace, binding["roleRef"]["name"]) in roles
        assert binding["subjects"] == [{"kind": "ServiceAccount",
                                        "name": service_account["name"],
                                        "namespace": service_account["namespace"]}]
    # the Lease the agents elect with is the one the Role lets them update
    lease_role = _one(documents, "Role", f"{RELEASE}-leader-election")
    args = _container(documents)["args"]
    assert f"--leader-elect-resource-name={lease_role['rules'][1]['resourceNames'][0]}" in args
    assert f"--leader-elect-resource-namespace={lease_role['metadata']['namespace']}" in args


# --- monitoring.coreos.com -------------------------------------------------------------

def test_monitoring_disabled_by_default(render: Render) -> None:
    assert not [d for d in render(MEMBER) if d["apiVersion"] == MONITORING]


def test_monitoring_service_monitor(render: Render) -> None:
    documents = render({**MEMBER, "serviceMonitor": {"enabled": True, "interval": "15s",
                                                     "labels": {"release": "prom"}}})
    monitor = _one(documents, "ServiceMonitor")
    assert monitor["apiVersion"] == MONITORING
    assert monitor["metadata"]["namespace"] == NAMESPACE
    assert monitor["metadata"]["labels"]["release"] == "prom"
    service = _one(documents, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() \
        <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics",
                                             "interval": "15s", "honorLabels": True}]
    assert "metrics" in {p["name"] for p in service["spec"]["ports"]}
    assert set(monitor) == {"apiVersion", "kind", "metadata", "spec"}


def test_monitoring_prometheus_rule_is_alerts_yaml(render: Render) -> None:
    documents = render({**MEMBER, "prometheusRule": {"enabled": True,
                                                     "labels": {"release": "prom"}}})
    rule = _one(documents, "PrometheusRule")
    assert rule["apiVersion"] == MONITORING
    assert rule["metadata"]["namespace"] == NAMESPACE
    assert rule["metadata"]["labels"]["release"] == "prom"
    assert set(rule) == {"apiVersion", "kind", "metadata", "spec"}
    assert rule["spec"] == {"groups": _alerts_file()["groups"]}
    # the operator's shape: rules with alert, expr, for, labels, annotations only
    for group in rule["spec"]["groups"]:
        assert set(group) == {"name", "rules"}
        for alert in group["rules"]:
            assert set(alert) <= {"alert", "expr", "for", "labels", "annotations"}
            assert isinstance(alert["expr"], str)
