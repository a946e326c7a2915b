"""Every chart lints strictly, renders, and renders only valid Kubernetes manifests."""

from __future__ import annotations

import pathlib
import subprocess
from typing import Any

import kubernetes_validate
import pytest
import yaml

from clusterhealth_localenv import binaries

CHARTS = pathlib.Path(__file__).resolve().parents[2] / "charts"
KUBERNETES = binaries.KUBERNETES_VERSION.lstrip("v")
ALL_CHARTS = sorted(p.name for p in CHARTS.iterdir() if (p / "Chart.yaml").exists())


@pytest.fixture(scope="module")
def helm() -> str:
    return str(binaries.ensure_helm())


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


@pytest.mark.parametrize("name", ALL_CHARTS)
def test_chart_lints_strictly(helm: str, name: str) -> None:
    chart = CHARTS / name
    _prepare(helm, chart)
    output = _helm(helm, "lint", "--strict", str(chart))
    assert "0 chart(s) failed" in output


def _value_sets(name: str) -> list[str | None]:
    """chart-testing's convention: a chart with ci/*-values.yaml is rendered with each."""
    found: list[str | None] = [
        str(p) for p in sorted((CHARTS / name / "ci").glob("*-values.yaml"))]
    return found or [None]


SCHEMALESS = {"monitoring.coreos.com/v1"}  # CRDs kubernetes-validate has no schema for


@pytest.mark.parametrize(("name", "values"),
                         [(n, v) for n in ALL_CHARTS for v in _value_sets(n)])
def test_rendered_manifests_are_valid(helm: str, name: str, values: str | None) -> None:
    chart = CHARTS / name
    _prepare(helm, chart)
    rendered = _helm(helm, "template", "release", str(chart), "--include-crds",
                     "--namespace", "clusterhealth-system", "--kube-version", KUBERNETES,
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
