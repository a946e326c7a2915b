"""The charts as users get them: a packaged chart repository, and OCI artifacts.

``scripts/package-charts.sh`` packages every chart into a folder with an
``index.yaml``; the folder is served over HTTP on loopback and added with
``helm repo add``, as a user adds a published repository, with helm's own
configuration in a temporary home.  From it, by name and without ``helm
dependency build``: every chart lints and renders (the three that depend on the
CRDs chart carry it), and two are really installed onto a local API server
(``helm install``) and uninstalled.  The same packages are pushed to a real OCI
registry (CNCF Distribution's ``registry``, built from the Go module proxy) and
rendered from ``oci://``.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import pathlib
import subprocess
import tarfile
import threading
import uuid
from collections.abc import Iterator

import pytest
import yaml

from clusterhealth_core.kube import errors as kube_errors
from clusterhealth_core.kube import resources
from clusterhealth_localenv import binaries, environment, processes

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHARTS = ("clusterhealth-crds", "clusterhealth-agent", "clusterhealth-remedy",
          "clusterhealth-mci-provider", "clusterhealth-controlplane")
DEPENDENT = ("clusterhealth-remedy", "clusterhealth-mci-provider", "clusterhealth-controlplane")
VERSION = yaml.safe_load((ROOT / "charts/remedy/Chart.yaml").read_text())["version"]
VALUES = {"clusterhealth-agent": ["--set", "clusterName=member1"]}
RBAC = "rbac.authorization.k8s.io"


class Helm:
    """helm with a configuration, cache and data home of its own (a user's fresh machine)."""

    def __init__(self, home: pathlib.Path) -> None:
        self.binary = str(binaries.ensure_helm())
        self.env = {**os.environ, "HELM_CONFIG_HOME": str(home / "config"),
                    "HELM_CACHE_HOME": str(home / "cache"), "HELM_DATA_HOME": str(home / "data")}

    def __call__(self, *args: str) -> str:
        proc = subprocess.run([self.binary, *args], capture_output=True, text=True,
                              check=False, env=self.env, timeout=180)
        assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc.stdout


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("chart-repository")
    proc = subprocess.run([str(ROOT / "scripts/package-charts.sh"), str(folder)],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "HELM": str(binaries.ensure_helm())})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "found symbolic link" not in proc.stderr
    return folder


@contextlib.contextmanager
def served(folder: pathlib.Path) -> Iterator[str]:
    """The folder over HTTP on loopback, as a web server publishes a chart repository."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def helm(repository: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    client = Helm(tmp_path_factory.mktemp("helm-home"))
    with served(repository) as url:
        client("repo", "add", "clusterhealth", url)
        client("repo", "update")
        yield client


def test_the_folder_is_a_repository_of_self_contained_packages(repository: pathlib.Path) -> None:
    index = yaml.safe_load((repository / "index.yaml").read_text())
    assert sorted(index["entries"]) == sorted(CHARTS)
    for name in CHARTS:
        (entry,) = index["entries"][name]
        assert entry["version"] == VERSION and entry["digest"]
        package = repository / f"{name}-{VERSION}.tgz"
        assert entry["urls"] == [package.name]
        with tarfile.open(package) as archive:
            members = set(archive.getnames())
        assert f"{name}/files/alerts.yaml" in members or name == "clusterhealth-crds"
        if name in DEPENDENT:  # the dependency travels in the package
            assert f"{name}/charts/clusterhealth-crds/Chart.yaml" in members
            assert (f"{name}/charts/clusterhealth-crds/crds/"
                    "remedy.karmada.io_remedies.yaml") in members


def test_every_chart_renders_and_lints_by_name(helm: Helm, repository: pathlib.Path,
                                               tmp_path: pathlib.Path) -> None:
    search = helm("search", "repo", "clusterhealth/", "-o", "yaml")
    assert sorted(entry["name"] for entry in yaml.safe_load(search)) == sorted(
        f"clusterhealth/{name}" for name in CHARTS)
    for name in CHARTS:
        rendered = helm("template", "r", f"clusterhealth/{name}", "--include-crds",
                        *VALUES.get(name, []))
        kinds = {d["kind"] for d in yaml.safe_load_all(rendered) if d}
        assert kinds, name
        if name in DEPENDENT or name == "clusterhealth-crds":
            assert "CustomResourceDefinition" in kinds, name
        # crds.enabled=false renders too, without any dependency build
        if name in DEPENDENT:
            helm("template", "r", f"clusterhealth/{name}", "--set", "crds.enabled=false")
        helm("lint", "--strict", str(repository / f"{name}-{VERSION}.tgz"),
             *VALUES.get(name, []))


async def test_helm_install_from_the_repository(helm: Helm, env: environment.LocalEnvironment
                                                ) -> None:
    kubeconfig = str(env.kubeconfig())
    suffix = uuid.uuid4().hex[:6]
    namespace = f"repo-{suffix}"
    cluster = f"repo-{suffix}"
    helm("install", f"agent-rbac-{suffix}", "clusterhealth/clusterhealth-agent",
         "--kubeconfig", kubeconfig, "--namespace", namespace, "--create-namespace",
         "--set", "target=controlPlane", "--set", f"clusterName={cluster}", "--wait")
    helm("install", f"remedy-{suffix}", "clusterhealth/clusterhealth-remedy",
         "--kubeconfig", kubeconfig, "--namespace", namespace, "--version", VERSION,
         "--set", "rbacOnly=true", "--set", "crds.enabled=false")
    cluster_roles = resources.Resource(RBAC, "v1", "clusterroles", "ClusterRole", False)
    async with env.client() as api:
        role = await api.get(cluster_roles, f"clusterhealth-agent:{cluster}")
        assert role["rules"][0]["resourceNames"] == [cluster]
        accounts = await api.list(resources.SERVICE_ACCOUNTS, namespace=namespace)
        assert any("remedy" in a["metadata"]["name"] for a in accounts["items"])
        listed = helm("list", "--kubeconfig", kubeconfig, "--namespace", namespace, "-o", "yaml")
        assert {r["chart"] for r in yaml.safe_load(listed)} == {
            f"clusterhealth-agent-{VERSION}", f"clusterhealth-remedy-{VERSION}"}
        helm("uninstall", f"agent-rbac-{suffix}", "--kubeconfig", kubeconfig,
             "--namespace", namespace, "--wait")
        helm("uninstall", f"remedy-{suffix}", "--kubeconfig", kubeconfig,
             "--namespace", namespace, "--wait")
        with pytest.raises(kube_errors.NotFound):
            await api.get(cluster_roles, f"clusterhealth-agent:{cluster}")
        await api.delete(resources.NAMESPACES, namespace)


async def test_oci_artifacts_from_a_local_registry(helm: Helm, repository: pathlib.Path,
                                                   tmp_path: pathlib.Path) -> None:
    port = environment.free_port("127.0.0.1")
    config = tmp_path / "registry.yaml"
    config.write_text(yaml.safe_dump({
        "version": 0.1, "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(tmp_path / "storage")}},
        "http": {"addr": f"127.0.0.1:{port}"}}))
    registry = processes.ManagedProcess(
        "registry", [str(binaries.ensure_registry()), "serve", str(config)],
        tmp_path / "registry.log")
    registry.start()
    try:
        await processes.wait_answering(registry, f"http://127.0.0.1:{port}/v2/", None, 30)
        target = f"oci://127.0.0.1:{port}/clusterhealth"
        for name in CHARTS:
            helm("push", str(repository / f"{name}-{VERSION}.tgz"), target, "--plain-http")
        rendered = helm("template", "r", f"{target}/clusterhealth-remedy", "--version", VERSION,
                        "--plain-http", "--include-crds")
        kinds = {d["kind"] for d in yaml.safe_load_all(rendered) if d}
        assert {"Deployment", "CustomResourceDefinition"} <= kinds
        pulled = tmp_path / "pulled"
        pulled.mkdir()  # helm pull writes into an existing folder only
        helm("pull", f"{target}/clusterhealth-agent", "--version", VERSION, "--plain-http",
             "--destination", str(pulled))
        assert (pulled / f"clusterhealth-agent-{VERSION}.tgz").read_bytes() == (
            repository / f"clusterhealth-agent-{VERSION}.tgz").read_bytes()
    finally:
        await registry.stop()
