"""Rendering a chart in tests: helm template with values, and picking manifests.

Shared by the chart test modules (test_charts.py and each chart's own).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from collections.abc import Callable
from typing import Any

import yaml

from clusterhealth_localenv import binaries

KUBERNETES = binaries.KUBERNETES_VERSION.lstrip("v")
Manifest = dict[str, Any]
Render = Callable[..., list[Manifest]]
CRDS = ["clusterpropagationpolicies.policy.karmada.io", "clusterresourcebindings.work.karmada.io",
        "clusters.cluster.karmada.io", "clustertaintpolicies.policy.karmada.io",
        "multiclusteringresses.networking.karmada.io",
        "propagationpolicies.policy.karmada.io", "remedies.remedy.karmada.io",
        "resourcebindings.work.karmada.io", "works.work.karmada.io"]
"""The CRDs the clusterhealth-crds chart installs (by name, sorted)."""


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], capture_output=True, text=True, check=False)


def helm_for(chart: pathlib.Path) -> str:
    """The helm binary; a chart's dependencies are in its ``charts/`` (no build step)."""
    helm = str(binaries.ensure_helm())
    for dependency in yaml.safe_load((chart / "Chart.yaml").read_text()).get("dependencies") or []:
        assert (chart / "charts" / dependency["name"]).is_dir(), (
            f"{chart}: the dependency {dependency['name']} is missing from charts/")
    return helm


def template_args(chart: pathlib.Path, release: str, namespace: str,
                  values: dict[str, Any] | None, sets: tuple[str, ...],
                  tmp_path: pathlib.Path, *extra: str) -> list[str]:
    args = ["template", release, str(chart), "--namespace", namespace,
            "--kube-version", KUBERNETES, *extra]
    if values is not None:
        # JSON is YAML: exact types (numbers stay numbers, unlike some --set forms).
        values_file = tmp_path / f"values-{len(list(tmp_path.iterdir()))}.yaml"
        values_file.write_text(json.dumps(values))
        args += ["--values", str(values_file)]
    for item in sets:
        args += ["--set", item]
    return args


def renderer(helm: str, chart: pathlib.Path, release: str, namespace: str,
             tmp_path: pathlib.Path) -> Render:
    """``render(values, *sets, include_crds=False)``: the manifests; fails if helm does."""

    def render(values: dict[str, Any] | None = None, *sets: str,
               include_crds: bool = False) -> list[Manifest]:
        extra = ("--include-crds",) if include_crds else ()
        proc = run_helm(helm, *template_args(chart, release, namespace, values, sets,
                                             tmp_path, *extra))
        assert proc.returncode == 0, f"helm template failed:\n{proc.stderr}"
        return [d for d in yaml.safe_load_all(proc.stdout) if d]

    return render


def error_renderer(helm: str, chart: pathlib.Path, release: str, namespace: str,
                   tmp_path: pathlib.Path) -> Callable[..., str]:
    """``render_error(values, *sets)``: helm must refuse; returns its error output."""

    def render_error(values: dict[str, Any] | None = None, *sets: str) -> str:
        proc = run_helm(helm, *template_args(chart, release, namespace, values, sets,
                                             tmp_path))
        assert proc.returncode != 0, f"helm template accepted bad values:\n{proc.stdout}"
        return proc.stderr

    return render_error


def one(documents: list[Manifest], kind: str, name: str | None = None) -> Manifest:
    found = [d for d in documents
             if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def crd_names(documents: list[Manifest]) -> list[str]:
    """The names of the CRDs among ``documents``, sorted."""
    return sorted(d["metadata"]["name"] for d in documents
                  if d["kind"] == "CustomResourceDefinition")


def kinds(documents: list[Manifest]) -> list[str]:
    return sorted(d["kind"] for d in documents)
