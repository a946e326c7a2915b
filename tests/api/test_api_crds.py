"""crds.load_crds finds the chart's CRDs, and can be pointed elsewhere."""

import pathlib
import shutil

import pytest
import yaml

from clusterhealth_core.api import crds, groups

REPO = pathlib.Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "clusterhealth-crds"


def test_default_location_is_the_chart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(crds.CRD_DIR_ENV, raising=False)
    assert crds.default_crd_dir() == CHART / "crds"
    names = [doc["metadata"]["name"] for doc in crds.load_crds()]
    assert names == [
        groups.CLUSTER.crd_name,
        groups.MCI.crd_name,
        groups.CLUSTER_PROPAGATION_POLICY.crd_name,
        groups.CLUSTER_TAINT_POLICY.crd_name,
        groups.PROPAGATION_POLICY.crd_name,
        groups.REMEDY.crd_name,
        groups.CLUSTER_RESOURCE_BINDING.crd_name,
        groups.RESOURCE_BINDING.crd_name,
        groups.WORK.crd_name,
    ]


def test_chart_dir_or_crds_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(crds.CRD_DIR_ENV, raising=False)
    assert crds.load_crds(CHART) == crds.load_crds(CHART / "crds") == crds.load_crds()


def test_env_override(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    shutil.copy(CHART / "crds" / "remedy.karmada.io_remedies.yaml", tmp_path)
    (tmp_path / "notes.txt").write_text("not yaml: ignored")
    monkeypatch.setenv(crds.CRD_DIR_ENV, str(tmp_path))
    assert crds.default_crd_dir() == tmp_path
    (only,) = crds.load_crds()
    assert only["spec"]["names"]["kind"] == groups.REMEDY.kind


def test_errors(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError, match=crds.CRD_DIR_ENV):
        crds.load_crds(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no CustomResourceDefinition"):
        crds.load_crds(tmp_path)
    (tmp_path / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    with pytest.raises(ValueError, match=r"a\.yaml: not an apiextensions"):
        crds.load_crds(tmp_path)


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "clusterhealth-crds"
    assert chart["version"] == "0.1.0"
    assert chart["type"] == "application"
    assert (CHART / "README.md").is_file()
    assert yaml.safe_load((CHART / "values.yaml").read_text()) in (None, {})
