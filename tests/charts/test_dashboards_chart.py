"""Each component chart renders its dashboards into a ConfigMap for Grafana's sidecar.

The ConfigMap holds the chart's ``dashboards/*.json`` verbatim (the files the
tests in tests/dashboards check), carries the sidecar's label (configurable,
``grafana_dashboard: "1"`` by default), goes to a namespace of the user's
choice, and is rendered only where the component runs.  Off by default.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import chartkit
import kubernetes_validate
import pytest
import yaml

from clusterhealth_localenv import binaries

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBERNETES = binaries.KUBERNETES_VERSION.lstrip("v")
NAMESPACE = "clusterhealth-system"
CHARTS = {
    # chart: (release, values it needs, values where the component does not run here)
    "agent": ("clusterhealth-agent", {"clusterName": "member1"},
              [{"target": "controlPlane",
                "controlPlane": {"subject": {"kind": "User", "name": "agent"}}}]),
    "remedy": ("clusterhealth-remedy", {}, [{"rbacOnly": True}]),
    "mci-provider": ("clusterhealth-mci-provider", {},
                     [{"rbacOnly": True}, {"target": "member", "crds": {"enabled": False}}]),
    "controlplane": ("clusterhealth-controlplane", {}, [{"rbacOnly": True}]),
}
ENABLED = {"dashboards": {"enabled": True}}


@pytest.fixture(params=sorted(CHARTS))
def chart(request: pytest.FixtureRequest, tmp_path: pathlib.Path
          ) -> tuple[str, chartkit.Render, dict[str, Any]]:
    name = str(request.param)
    path = ROOT / "charts" / name
    release, base, _ = CHARTS[name]
    render = chartkit.renderer(chartkit.helm_for(path), path, release, NAMESPACE, tmp_path)
    return name, render, base


def _dashboard_maps(documents: list[chartkit.Manifest]) -> list[chartkit.Manifest]:
    return [d for d in documents
            if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboards")]


def _files(name: str) -> dict[str, str]:
    return {p.name: p.read_text() for p in (ROOT / "charts" / name / "dashboards").glob("*.json")}


def test_off_by_default(chart: tuple[str, chartkit.Render, dict[str, Any]]) -> None:
    _, render, base = chart
    assert _dashboard_maps(render(base)) == []
    assert yaml.safe_load((ROOT / "charts" / chart[0] / "values.yaml").read_text())[
        "dashboards"] == {"enabled": False, "labels": {"grafana_dashboard": "1"},
                          "annotations": {}, "namespace": ""}


def test_enabled_renders_the_files_with_the_sidecar_label(
        chart: tuple[str, chartkit.Render, dict[str, Any]]) -> None:
    name, render, base = chart
    (configmap,) = _dashboard_maps(render({**base, **ENABLED}))
    kubernetes_validate.validate(configmap, KUBERNETES, strict=True)
    metadata = configmap["metadata"]
    assert metadata["namespace"] == NAMESPACE
    assert metadata["labels"]["grafana_dashboard"] == "1"
    assert metadata["labels"]["app.kubernetes.io/part-of"] == "clusterhealth"
    assert "annotations" not in metadata
    files = _files(name)
    assert files and set(configmap["data"]) == set(files)
    for key, text in files.items():
        # the file, byte for byte, so that what the tests checked is what Grafana loads
        assert configmap["data"][key] == text
        assert json.loads(configmap["data"][key])["uid"]


def test_label_annotations_and_namespace_are_the_users(
        chart: tuple[str, chartkit.Render, dict[str, Any]]) -> None:
    _, render, base = chart
    # the sidecar's label with another value (its labelValue setting)
    values = {**base, "dashboards": {
        "enabled": True, "labels": {"grafana_dashboard": "clusterhealth"},
        "annotations": {"grafana_folder": "clusterhealth"}, "namespace": "monitoring"}}
    (configmap,) = _dashboard_maps(render(values))
    kubernetes_validate.validate(configmap, KUBERNETES, strict=True)
    metadata = configmap["metadata"]
    assert metadata["namespace"] == "monitoring"
    assert metadata["labels"]["grafana_dashboard"] == "clusterhealth"
    assert metadata["annotations"] == {"grafana_folder": "clusterhealth"}
    # another label key (its label setting): Helm merges maps, so null drops the default
    values = {**base, "dashboards": {
        "enabled": True, "labels": {"grafana_dashboard": None, "example.com/dashboard": "1"}}}
    (configmap,) = _dashboard_maps(render(values))
    labels = configmap["metadata"]["labels"]
    assert labels["example.com/dashboard"] == "1"
    assert "grafana_dashboard" not in labels


@pytest.mark.parametrize("name", sorted(CHARTS))
def test_not_rendered_where_the_component_does_not_run(name: str,
                                                       tmp_path: pathlib.Path) -> None:
    path = ROOT / "charts" / name
    release, base, elsewhere = CHARTS[name]
    render = chartkit.renderer(chartkit.helm_for(path), path, release, NAMESPACE, tmp_path)
    for values in elsewhere:
        documents = render({**base, **values, **ENABLED})
        assert documents
        assert _dashboard_maps(documents) == [], values


@pytest.mark.parametrize("dashboards", [
    {"enabled": "yes"},
    {"namespace": "Monitoring"},
    {"namespace": "a" * 64},
    {"labels": {"grafana_dashboard": 1}},
    {"label": {"grafana_dashboard": "1"}},
])
def test_schema_refuses_bad_values(dashboards: dict[str, Any], tmp_path: pathlib.Path) -> None:
    for name in sorted(CHARTS):
        path = ROOT / "charts" / name
        release, base, _ = CHARTS[name]
        render_error = chartkit.error_renderer(chartkit.helm_for(path), path, release,
                                               NAMESPACE, tmp_path)
        assert "dashboards" in render_error({**base, "dashboards": dashboards}), name


@pytest.mark.parametrize("name", sorted(CHARTS))
def test_readme_documents_the_dashboards(name: str) -> None:
    readme = (ROOT / "charts" / name / "README.md").read_text()
    assert "`dashboards.enabled`" in readme
    assert "docs/dashboards.md" in readme
    for file in _files(name):
        assert f"dashboards/{file}" in readme, file
