"""What every chart must be: the checks shared by all the charts, parametrized over them.

Every chart lints strictly with its defaults and with each of its
``ci/*-values.yaml``, and renders only valid Kubernetes manifests with each of
them (with its defaults when it has none); the component charts
(agent, remedy, MCI provider, control plane) have a closed draft-07 values
schema that refuses bad values, and those that carry the CRDs take them from
the ``clusterhealth-crds`` chart.  What is particular to one chart is tested in
its own module (``test_<chart>_chart.py``).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from typing import Any

import chartkit
import kubernetes_validate
import pytest
import yaml

from clusterhealth_localenv import binaries

CHARTS = pathlib.Path(__file__).resolve().parents[2] / "charts"
KUBERNETES = binaries.KUBERNETES_VERSION.lstrip("v")
NAMESPACE = "clusterhealth-system"
ALL_CHARTS = sorted(p.name for p in CHARTS.iterdir() if (p / "Chart.yaml").exists())


def _helm(helm: str, *args: str) -> str:
    proc = subprocess.run([helm, *args], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"helm {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _prepare(helm: str, chart: pathlib.Path) -> None:
    if any(d.get("repository", "").startswith("file://")
           for d in (yaml.safe_load((chart / "Chart.yaml").read_text()).get("dependencies") or [])):
        _helm(helm, "dependency", "build", str(chart))


def test_there_are_charts() -> None:
    assert "clusterhealth-crds" in ALL_CHARTS


def _ci_values(name: str) -> list[str]:
    """chart-testing's convention: a chart's ci/*-values.yaml, each rendered and linted."""
    return sorted(p.name for p in (CHARTS / name / "ci").glob("*-values.yaml"))


def _value_sets(name: str) -> list[str | None]:
    found: list[str | None] = [str(CHARTS / name / "ci" / v) for v in _ci_values(name)]
    return found or [None]


def _release(name: str) -> str:
    """The release name the charts are rendered with: the chart's own name."""
    return str(yaml.safe_load((CHARTS / name / "Chart.yaml").read_text())["name"])


@pytest.mark.parametrize(("name", "values"), [
    (n, v) for n in ALL_CHARTS
    for v in [None, *(str(CHARTS / n / "ci" / f) for f in _ci_values(n))]])
def test_chart_lints_strictly(helm: str, name: str, values: str | None) -> None:
    chart = CHARTS / name
    _prepare(helm, chart)
    output = _helm(helm, "lint", "--strict", str(chart),
                   *(["--values", values] if values else []))
    assert "0 chart(s) failed" in output


SCHEMALESS = {"monitoring.coreos.com/v1"}  # CRDs kubernetes-validate has no schema for


@pytest.mark.parametrize(("name", "values"),
                         [(n, v) for n in ALL_CHARTS for v in _value_sets(n)])
def test_rendered_manifests_are_valid(helm: str, name: str, values: str | None) -> None:
    chart = CHARTS / name
    _prepare(helm, chart)
    rendered = _helm(helm, "template", _release(name), str(chart), "--include-crds",
                     "--namespace", NAMESPACE, "--kube-version", KUBERNETES,
                     *(["--values", values] if values else []))
    documents: list[dict[str, Any]] = [d for d in yaml.safe_load_all(rendered) if d]
    assert documents, f"{name} renders nothing"
    for document in documents:
        if document["apiVersion"] not in SCHEMALESS:
            kubernetes_validate.validate(document, KUBERNETES, strict=True)


# --- one image for every chart (issue 23): global.imageRegistry / imageTag, digests ----------

IMAGE_CHARTS = {"agent": ["--set", "clusterName=member1"], "remedy": [], "mci-provider": [],
                "controlplane": []}
HELPER = "clusterhealth.image"


def _images(helm: str, name: str, *values: str) -> list[str]:
    """Every container image the chart renders (Deployments and DaemonSets)."""
    chart = CHARTS / name
    _prepare(helm, chart)
    rendered = _helm(helm, "template", "release", str(chart), "--namespace", "ns",
                     "--kube-version", KUBERNETES, *IMAGE_CHARTS[name], *values)
    return [c["image"] for d in yaml.safe_load_all(rendered) if d
            and d["kind"] in ("Deployment", "DaemonSet")
            for c in d["spec"]["template"]["spec"]["containers"]]


def test_every_chart_has_the_same_image_helper() -> None:
    def helper(name: str) -> str:
        text = (CHARTS / name / "templates" / "_helpers.tpl").read_text()
        start = text.index(f'{{{{- define "{HELPER}" -}}}}')
        return text[start:text.index("{{- end -}}\n{{- end -}}", start)]

    texts = {name: helper(name) for name in IMAGE_CHARTS}
    assert len(set(texts.values())) == 1, "the charts' image helpers differ"


@pytest.mark.parametrize("name", sorted(IMAGE_CHARTS))
def test_one_image_repository_and_the_global_values(helm: str, name: str) -> None:
    own = {"clusterhealth:0.1.0"} | ({"clusterhealth-haproxy:0.1.0"}
                                     if name == "mci-provider" else set())
    assert set(_images(helm, name)) == own
    mirrored = _images(helm, name, "--set", "global.imageRegistry=mirror.example.org/ch/",
                       "--set", "global.imageTag=0.2.0")
    assert set(mirrored) == {f"mirror.example.org/ch/{i.replace('0.1.0', '0.2.0')}"
                             for i in own}
    # a chart's own tag wins over global.imageTag; global.imageRegistry over its registry
    pinned = _images(helm, name, "--set", "image.registry=reg.example.org",
                     "--set", "image.tag=1.0.0", "--set", "global.imageTag=0.2.0")
    assert "reg.example.org/clusterhealth:1.0.0" in pinned
    digest = "sha256:" + "ab" * 32
    by_digest = _images(helm, name, "--set", f"image.digest={digest}",
                        "--set", "global.imageRegistry=mirror.example.org")
    assert f"mirror.example.org/clusterhealth@{digest}" in by_digest


@pytest.mark.parametrize("value", ["image.digest=sha256:abc", "image.digest=md5:" + "a" * 32,
                                   "image.tag=with space", "global.imageTag=-bad"])
def test_bad_image_values_are_refused(helm: str, value: str) -> None:
    chart = CHARTS / "remedy"
    _prepare(helm, chart)
    proc = subprocess.run([helm, "template", "release", str(chart), "--set", value],
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "schema" in proc.stderr, proc.stderr


# --- the component charts: values, their schema, the CRDs ------------------------------------

COMPONENT_CHARTS = ("agent", "remedy", "mci-provider", "controlplane")
CI_VALUES = {
    "agent": ["control-plane-values.yaml", "member-values.yaml"],
    "remedy": ["control-plane-values.yaml", "karmada-host-values.yaml",
               "karmada-rbac-values.yaml"],
    "mci-provider": ["control-plane-values.yaml", "karmada-host-values.yaml",
                     "karmada-rbac-values.yaml", "member-subject-values.yaml",
                     "member-values.yaml", "sidecar-values.yaml"],
    "controlplane": ["control-plane-values.yaml", "karmada-host-values.yaml",
                     "karmada-rbac-values.yaml"],
}
"""The ci/*-values.yaml each component chart has (a file lost or added is noticed)."""
VALUES_LINES = {"remedy": 61, "mci-provider": 98, "controlplane": 92}  # each + prometheusRule
"""The most lines each chart's values.yaml may have (the values a user reads first)."""
WITH_CRDS = ("remedy", "mci-provider", "controlplane")
"""The charts that install the CRDs (from the clusterhealth-crds chart)."""
REQUIRED = {"agent": {"clusterName": "member1"}}
"""Values a chart cannot render without, given with each bad value (the agent's cluster)."""


@pytest.mark.parametrize("name", COMPONENT_CHARTS)
def test_there_are_ci_values(name: str) -> None:
    assert _ci_values(name) == CI_VALUES[name]


@pytest.mark.parametrize("name", COMPONENT_CHARTS)
def test_schema_is_draft_07_and_closed(name: str) -> None:
    schema = json.loads((CHARTS / name / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False
    values = yaml.safe_load((CHARTS / name / "values.yaml").read_text())
    assert set(values) <= set(schema["properties"])


@pytest.mark.parametrize("name", sorted(VALUES_LINES))
def test_values_file_is_short(name: str) -> None:
    lines = len((CHARTS / name / "values.yaml").read_text().splitlines())
    assert lines <= VALUES_LINES[name]


@pytest.mark.parametrize("name", WITH_CRDS)
def test_chart_depends_on_the_crds_chart_by_file(name: str) -> None:
    chart = CHARTS / name
    assert _release(name) == f"clusterhealth-{name}"
    assert yaml.safe_load((chart / "Chart.yaml").read_text())["dependencies"] == [
        {"name": "clusterhealth-crds", "version": "0.1.0",
         "repository": "file://../clusterhealth-crds", "condition": "crds.enabled"}]
    crds_chart = yaml.safe_load((CHARTS / "clusterhealth-crds" / "Chart.yaml").read_text())
    assert crds_chart["version"] == "0.1.0"
    assert yaml.safe_load((chart / "values.yaml").read_text())["crds"] == {"enabled": True}
    # the dependency is carried (a link to the CRDs chart), so no `helm dependency build`;
    # what that command would write is not committed
    assert (chart / "charts" / "clusterhealth-crds").resolve() == (
        CHARTS / "clusterhealth-crds").resolve()
    ignored = (CHARTS.parent / ".gitignore").read_text().splitlines()
    assert "charts/*/charts/*.tgz" in ignored
    assert "charts/*/Chart.lock" in ignored


@pytest.mark.parametrize("name", WITH_CRDS)
def test_crds_come_from_the_dependency(helm: str, name: str, tmp_path: pathlib.Path) -> None:
    render = chartkit.renderer(helm, CHARTS / name, _release(name),
                               NAMESPACE, tmp_path)
    assert chartkit.crd_names(render(include_crds=True)) == chartkit.CRDS
    assert chartkit.crd_names(render()) == []  # only with --include-crds, as Helm does
    disabled = render({"crds": {"enabled": False}}, include_crds=True)
    assert chartkit.crd_names(disabled) == []
    assert chartkit.kinds(disabled) == chartkit.kinds(render())


AGENT_BAD_VALUES = [
    ({"failureQuorum": 1.5}, "/failureQuorum"),
    ({"failureQuorum": 0}, "/failureQuorum"),
    ({"failureQuorum": "1.5"}, "/failureQuorum"),
    ({"detectors": ["dns", "kubelet"]}, "/detectors/1"),
    ({"detectors": []}, "/detectors"),
    ({"detectors": ["dns", "dns"]}, "/detectors"),
    ({"clusterNmae": "member1"}, "additional properties 'clusterNmae' not allowed"),
    ({"detectPeriod": "5"}, "/detectPeriod"),
    ({"staleThreshold": "1d"}, "/staleThreshold"),
    ({"target": "controlplane"}, "/target"),
    ({"probes": [{"name": "x", "type": "icmp", "conditionType": "X"}]}, "/probes/0/type"),
    ({"probes": [{"type": "dns", "conditionType": "X"}]}, "/probes/0"),
    ({"probes": [{"name": "x", "type": "dns"}]}, "/probes/0"),
    ({"probes": [{"name": "x", "type": "dns", "conditionType": "Ready"}]},
     "/probes/0/conditionType"),
    ({"probes": [{"name": "x", "type": "dns", "conditionType": "X", "query": "a."}]},
     "/probes/0"),
    ({"clusterName": "Member_1"}, "/clusterName"),
    ({"clusterName": "m" * 49}, "/clusterName"),
    ({"controlPlane": {"subject": {"kind": "Robot", "name": "r"}}}, "/controlPlane/subject/kind"),
]


REMEDY_BAD_VALUES = [
    ({"replicas": 0}, "/replicas"),
    ({"replicas": -1}, "/replicas"),
    ({"replicas": 1.5}, "/replicas"),
    ({"replicas": "2"}, "/replicas"),
    ({"workers": 0}, "/workers"),
    ({"workers": 65}, "/workers"),
    ({"workers": 2.5}, "/workers"),
    ({"resyncPeriod": "5"}, "/resyncPeriod"),
    ({"resyncPeriod": "1d"}, "/resyncPeriod"),
    ({"resyncPeriod": "0s"}, "/resyncPeriod"),
    ({"resyncPeriod": "-5m"}, "/resyncPeriod"),
    ({"resyncPeriod": 300}, "/resyncPeriod"),
    ({"leaderElection": {"leaseDuration": "15"}}, "/leaderElection/leaseDuration"),
    ({"leaderElection": {"renewDeadline": "ten"}}, "/leaderElection/renewDeadline"),
    ({"leaderElection": {"retryPeriod": "0ms"}}, "/leaderElection/retryPeriod"),
    ({"leaderElection": {"leaseName": "x"}}, "additional properties 'leaseName' not allowed"),
    ({"replica": 2}, "additional properties 'replica' not allowed"),
    ({"eventNamespace": "Default"}, "/eventNamespace"),
    ({"eventNamespace": ""}, "/eventNamespace"),
    # the API server refuses Events about cluster-scoped objects anywhere else
    ({"eventNamespace": "clusterhealth-system"}, "/eventNamespace"),
    ({"eventNamespace": "karmada-system"}, "/eventNamespace"),
    ({"image": {"repository": "x", "pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"image": {"repository": ""}}, "/image/repository"),
    ({"extraArgs": ["workers=3"]}, "/extraArgs/0"),
    ({"kubeconfigSecret": {"name": "Bad_Name", "key": "kubeconfig"}}, "/kubeconfigSecret/name"),
    ({"kubeconfigSecret": {"name": "kc", "key": "a/b"}}, "/kubeconfigSecret/key"),
    ({"kubeconfigSecret": {"secretName": "kc"}}, "/kubeconfigSecret"),
    ({"crds": {"enabled": "no"}}, "/crds/enabled"),
    ({"crds": {"install": False}}, "additional properties 'install' not allowed"),
    ({"rbacOnly": "true"}, "/rbacOnly"),
    ({"serviceMonitor": {"enabled": True, "interval": "30"}}, "/serviceMonitor/interval"),
    ({"serviceMonitor": {"enable": True}}, "additional properties 'enable' not allowed"),
    ({"nodeSelector": {"zone": 1}}, "/nodeSelector/zone"),
]


MCI_BAD_VALUES = [
    ({"replicas": 0}, "/replicas"),
    ({"replicas": -1}, "/replicas"),
    ({"replicas": 1.5}, "/replicas"),
    ({"replicas": "2"}, "/replicas"),
    ({"workers": 0}, "/workers"),
    ({"workers": 65}, "/workers"),
    ({"target": "controlplane"}, "/target"),
    ({"provider": "nginx"}, "/provider"),
    ({"provider": "HAProxy"}, "/provider"),
    ({"haproxy": {"slots": 0}}, "/haproxy/slots"),
    ({"haproxy": {"slots": 4097}}, "/haproxy/slots"),
    ({"haproxy": {"slots": 2.5}}, "/haproxy/slots"),
    ({"haproxy": {"serversPerSlot": 0}}, "/haproxy/serversPerSlot"),
    ({"haproxy": {"serversPerSlot": 1025}}, "/haproxy/serversPerSlot"),
    ({"haproxy": {"drainTimeout": "30"}}, "/haproxy/drainTimeout"),
    ({"haproxy": {"drainTimeout": "0s"}}, "/haproxy/drainTimeout"),
    ({"haproxy": {"socket": "admin.sock"}}, "/haproxy/socket"),
    ({"haproxy": {"socket": "/var/run/haproxy/"}}, "/haproxy/socket"),
    ({"haproxy": {"socket": "10.0.0.1"}}, "/haproxy/socket"),
    ({"haproxy": {"socket": "/var/run/my haproxy.sock"}}, "/haproxy/socket"),
    ({"haproxy": {"socketVolume": {"emptyDir": {}, "hostPath": {"path": "/x"}}}},
     "/haproxy/socketVolume"),
    ({"haproxy": {"slot": 2}}, "additional properties 'slot' not allowed"),
    ({"haproxy": {"sidecar": {"enabled": "yes"}}}, "/haproxy/sidecar/enabled"),
    ({"haproxy": {"sidecar": {"frontendPort": 80}}}, "/haproxy/sidecar/frontendPort"),
    ({"haproxy": {"sidecar": {"frontendPort": 65536}}}, "/haproxy/sidecar/frontendPort"),
    ({"haproxy": {"sidecar": {"frontendPort": 10360}}}, "/haproxy/sidecar/frontendPort"),
    ({"haproxy": {"sidecar": {"image": ""}}}, "/haproxy/sidecar/image"),
    ({"haproxy": {"sidecar": {"port": 8080}}}, "additional properties 'port' not allowed"),
    ({"ingressClass": {"name": "Cluster_Health"}}, "/ingressClass/name"),
    ({"ingressClass": {"name": ""}}, "/ingressClass/name"),
    ({"ingressClass": {"default": "true"}}, "/ingressClass/default"),
    ({"ingressClass": {"controller": "x"}}, "additional properties 'controller' not allowed"),
    ({"failOpen": "false"}, "/failOpen"),
    ({"haproxy": {"monitorInterval": "5"}}, "/haproxy/monitorInterval"),
    ({"haproxy": {"monitorInterval": "0s"}}, "/haproxy/monitorInterval"),
    ({"clusterSecretNamespace": "Karmada"}, "/clusterSecretNamespace"),
    ({"resyncPeriod": "5"}, "/resyncPeriod"),
    ({"resyncPeriod": "1d"}, "/resyncPeriod"),
    ({"leaderElection": {"leaseDuration": "15"}}, "/leaderElection/leaseDuration"),
    ({"leaderElection": {"retryPeriod": "0ms"}}, "/leaderElection/retryPeriod"),
    ({"replica": 2}, "additional properties 'replica' not allowed"),
    ({"image": {"repository": "x", "pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"extraArgs": ["workers=3"]}, "/extraArgs/0"),
    ({"kubeconfigSecret": {"name": "Bad_Name", "key": "kubeconfig"}}, "/kubeconfigSecret/name"),
    ({"crds": {"enabled": "no"}}, "/crds/enabled"),
    ({"rbacOnly": "true"}, "/rbacOnly"),
    ({"serviceMonitor": {"enabled": True, "interval": "30"}}, "/serviceMonitor/interval"),
    ({"member": {"subject": {"kind": "Robot", "name": "r"}}}, "/member/subject/kind"),
    ({"member": {"subjects": []}}, "additional properties 'subjects' not allowed"),
    ({"nodeSelector": {"zone": 1}}, "/nodeSelector/zone"),
]


CONTROLPLANE_BAD_VALUES = [
    ({"controllerManager": {"replicas": 0}}, "/controllerManager/replicas"),
    ({"scheduler": {"replicas": 1.5}}, "/scheduler/replicas"),
    ({"controllerManager": {"workers": 0}}, "/controllerManager/workers"),
    ({"controllerManager": {"workers": 65}}, "/controllerManager/workers"),
    ({"scheduler": {"workers": 100}}, "/scheduler/workers"),
    ({"scheduler": {"workers": "8"}}, "/scheduler/workers"),
    ({"controllerManager": {"resyncPeriod": "5"}}, "/controllerManager/resyncPeriod"),
    ({"controllerManager": {"resyncPeriod": "1d"}}, "/controllerManager/resyncPeriod"),
    ({"controllerManager": {"resyncPeriod": "0s"}}, "/controllerManager/resyncPeriod"),
    ({"controllerManager": {"resyncPeriod": 300}}, "/controllerManager/resyncPeriod"),
    ({"leaderElection": {"leaseDuration": "15"}}, "/leaderElection/leaseDuration"),
    ({"leaderElection": {"retryPeriod": "0ms"}}, "/leaderElection/retryPeriod"),
    ({"controllerManager": {"controllers": "scheduler"}}, "/controllerManager/controllers"),
    ({"controllerManager": {"controllers": "*,-remedy"}}, "/controllerManager/controllers"),
    ({"controllerManager": {"controllers": "Detector"}}, "/controllerManager/controllers"),
    ({"controllerManager": {"controllers": "detector,"}}, "/controllerManager/controllers"),
    ({"controllerManager": {"controllers": ""}}, "/controllerManager/controllers"),
    ({"controllerManager": {"controllers": ["detector"]}}, "/controllerManager/controllers"),
    ({"scheduler": {"plugins": "*,-NoSuchPlugin"}}, "/scheduler/plugins"),
    ({"scheduler": {"plugins": "clusteraffinity"}}, "/scheduler/plugins"),
    ({"scheduler": {"enabled": "yes"}}, "/scheduler/enabled"),
    ({"scheduler": {"leaseName": "x"}}, "additional properties 'leaseName' not allowed"),
    ({"controllerManager": {"controler": "*"}}, "additional properties 'controler' not allowed"),
    ({"replicas": 2}, "additional properties 'replicas' not allowed"),
    ({"workers": 2}, "additional properties 'workers' not allowed"),
    ({"eventNamespace": "clusterhealth-system"}, "/eventNamespace"),
    ({"image": {"repository": "x", "pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"controllerManager": {"extraArgs": ["workers=3"]}}, "/controllerManager/extraArgs/0"),
    ({"templateKinds": [{"apiGroup": "apps"}]}, "/templateKinds/0"),
    ({"templateKinds": [{"apiGroup": "apps", "resources": []}]}, "/templateKinds/0/resources"),
    ({"templateKinds": [{"apiGroup": "apps", "resources": ["Deployments"]}]},
     "/templateKinds/0/resources/0"),
    ({"templateKinds": [{"apiGroup": "apps", "resources": ["deployments/status"]}]},
     "/templateKinds/0/resources/0"),
    ({"templateKinds": [{"apiGroup": "Apps", "resources": ["deployments"]}]},
     "/templateKinds/0/apiGroup"),
    ({"templateKinds": [{"apiGroup": "apps", "resources": ["deployments"], "verbs": ["get"]}]},
     "additional properties 'verbs' not allowed"),
    ({"kubeconfigSecret": {"name": "Bad_Name", "controllerManagerKey": "a",
                           "schedulerKey": "b"}}, "/kubeconfigSecret/name"),
    ({"kubeconfigSecret": {"name": "kc", "key": "kubeconfig"}}, "/kubeconfigSecret"),
    ({"crds": {"enabled": "no"}}, "/crds/enabled"),
    ({"rbacOnly": "true"}, "/rbacOnly"),
    ({"serviceMonitor": {"enabled": True, "interval": "30"}}, "/serviceMonitor/interval"),
    ({"nodeSelector": {"zone": 1}}, "/nodeSelector/zone"),
]


BAD_VALUES = {"agent": AGENT_BAD_VALUES, "remedy": REMEDY_BAD_VALUES,
              "mci-provider": MCI_BAD_VALUES, "controlplane": CONTROLPLANE_BAD_VALUES}


@pytest.mark.parametrize(("name", "values", "message"),
                         [(n, v, m) for n, cases in BAD_VALUES.items() for v, m in cases])
def test_schema_rejects_bad_values(helm: str, tmp_path: pathlib.Path, name: str,
                                   values: dict[str, Any], message: str) -> None:
    render_error = chartkit.error_renderer(helm, CHARTS / name,
                                           _release(name), NAMESPACE, tmp_path)
    error = render_error({**REQUIRED.get(name, {}), **values})
    assert "don't meet the specifications of the schema" in error, error
    assert message in error, error
