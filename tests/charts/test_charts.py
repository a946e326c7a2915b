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
