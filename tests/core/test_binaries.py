"""Building from the Go module proxy: the generated go.mods, the cache layout, the errors."""

from __future__ import annotations

import pathlib

import pytest

from clusterhealth_localenv import binaries

UPSTREAM = """module k8s.io/kubernetes

go 1.24.0

require (
\tgo.etcd.io/etcd/server/v3 v3.6.4 // indirect
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
)
"""


def test_replace_lines_pin_staging_modules() -> None:
    gomod = binaries.kubernetes_gomod("v1.34.4", UPSTREAM)
    assert "\tk8s.io/kubernetes v1.34.4" in gomod
    assert "\tgo.etcd.io/etcd/server/v3 v3.6.4" in gomod
    for module in ("k8s.io/api", "k8s.io/apiserver", "k8s.io/client-go"):
        assert f"\t{module} => {module} v0.34.4" in gomod
    assert "./staging" not in gomod


@pytest.mark.parametrize(
    ("version", "upstream", "message"),
    [("v1.34.4", "module k8s.io/kubernetes\n", "no staging modules"),
     ("1.34", UPSTREAM, "unsupported Kubernetes version")],
)
def test_bad_inputs(version: str, upstream: str, message: str) -> None:
    with pytest.raises(binaries.ProvisionError, match=message):
        binaries.kubernetes_gomod(version, upstream)


def test_version_is_stamped_into_the_binary() -> None:
    flags = binaries._version_ldflags("v1.34.4")
    assert "k8s.io/component-base/version.gitVersion=v1.34.4" in flags
    assert "gitMinor=34" in flags


KARMADA_UPSTREAM = """module github.com/karmada-io/karmada

go 1.25.10 // keep in sync with .go-version

require (
\tk8s.io/api v0.35.3
)

replace (
\tgithub.com/example/forked => github.com/example/forked v1.2.3 // a fix
\tgithub.com/example/old v0.1.0 => github.com/example/new v0.2.0
)

replace github.com/example/single => github.com/example/single v0.0.9
"""


def test_karmada_gomod_requires_karmada_and_repeats_its_replaces() -> None:
    gomod = binaries.karmada_gomod("v1.18.2", KARMADA_UPSTREAM)
    assert "require github.com/karmada-io/karmada v1.18.2" in gomod
    assert "\ngo 1.25.10\n" in gomod
    for entry in ("github.com/example/forked => github.com/example/forked v1.2.3",
                  "github.com/example/old v0.1.0 => github.com/example/new v0.2.0",
                  "github.com/example/single => github.com/example/single v0.0.9"):
        assert f"\t{entry}\n" in gomod
    assert "// a fix" not in gomod


def test_karmada_gomod_without_replaces_has_no_replace_block() -> None:
    gomod = binaries.karmada_gomod("v1.18.2", "module github.com/karmada-io/karmada\n\ngo 1.25\n")
    assert "replace" not in gomod


@pytest.mark.parametrize(
    ("version", "upstream", "message"),
    [("1.18", "module m\n", "unsupported Karmada version"),
     ("v1.18.2", "module m\n\nreplace a => ./local\n", "local path")],
)
def test_karmada_bad_inputs(version: str, upstream: str, message: str) -> None:
    with pytest.raises(binaries.ProvisionError, match=message):
        binaries.karmada_gomod(version, upstream)


def test_karmada_version_is_stamped_as_its_build_does() -> None:
    flags = binaries._karmada_ldflags("v1.18.2", "0533b555e040596f4fff9b6a344efbaeed71d0cc")
    pkg = "github.com/karmada-io/karmada/pkg/version"
    assert f"-X {pkg}.gitVersion=v1.18.2" in flags
    assert f"-X {pkg}.gitShortCommit=0533b555e" in flags


def test_karmada_cache_layout(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERHEALTH_CACHE", str(tmp_path))
    layout = binaries.karmada_binaries("v1.18.2")
    directory = tmp_path / "bin" / "karmada-v1.18.2"
    assert layout.aggregated_apiserver == directory / "karmada-aggregated-apiserver"
    assert layout.crd_dir.parent == layout.controller_manager.parent
    assert not layout.complete()
    with pytest.raises(binaries.ProvisionError, match="not in"):
        layout.crd("remedy.karmada.io_remedies.yaml")


def test_a_missing_go_toolchain_is_a_provision_error(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERHEALTH_CACHE", str(tmp_path))
    monkeypatch.setattr(binaries.shutil, "which", lambda *_args, **_kw: None)
    monkeypatch.setattr(binaries.os, "access", lambda *_args: False)
    with pytest.raises(binaries.ProvisionError, match="Go toolchain is missing"):
        binaries.ensure_karmada("v1.18.2")


def test_an_unreachable_module_proxy_is_a_provision_error(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real ``go`` against a proxy nobody listens on, with an empty module cache."""
    monkeypatch.setenv("CLUSTERHEALTH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "gomod"))
    monkeypatch.setenv("GOPROXY", "https://127.0.0.1:1")
    monkeypatch.setenv("GOFLAGS", "-modcacherw")
    with pytest.raises(binaries.ProvisionError, match=r"Go module proxy \(https://127.0.0.1:1\)"):
        binaries.ensure_karmada("v1.18.2")
    assert not binaries.karmada_binaries("v1.18.2").aggregated_apiserver.parent.exists()


# --- every Go module is verified (issue 19, supply chain) ------------------------------------

SYNC = "golang.org/x/sync"
SYNC_VERSION = "v0.12.0"  # in the module cache of every machine that built the binaries


def _program(root: pathlib.Path, go_sum: str | None = None) -> pathlib.Path:
    source = root / "src"
    source.mkdir(parents=True)
    (source / "go.mod").write_text(f"module example.test/sumcheck\n\ngo 1.24\n\n"
                                   f"require {SYNC} {SYNC_VERSION}\n")
    (source / "main.go").write_text(
        'package main\n\nimport "golang.org/x/sync/errgroup"\n\n'
        "func main() { var g errgroup.Group; _ = g.Wait() }\n")
    if go_sum is not None:
        (source / "go.sum").write_text(go_sum)
    return source


def test_go_sum_is_written_from_the_checksum_database_and_then_enforced(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh module gets a verified go.sum; a go.sum that disagrees stops the build."""
    monkeypatch.setenv("CLUSTERHEALTH_CACHE", str(tmp_path / "cache"))
    binary = binaries.ensure_go_program(_program(tmp_path / "good"), "sumcheck")
    assert binary.exists()
    tampered = (f"{SYNC} {SYNC_VERSION} h1:{'A' * 43}=\n"
                f"{SYNC} {SYNC_VERSION}/go.mod h1:{'B' * 43}=\n")
    with pytest.raises(binaries.ProvisionError, match=r"checksum mismatch|SECURITY ERROR"):
        binaries.ensure_go_program(_program(tmp_path / "bad", tampered), "sumcheck")


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("GOSUMDB", "off", "GOSUMDB=off"), ("GOFLAGS", "-insecure", "GOFLAGS=-insecure")])
def test_turning_the_checksum_check_off_is_refused(variable: str, value: str,
                                                   message: str) -> None:
    with pytest.raises(binaries.ProvisionError, match=message):
        binaries.checksum_env({variable: value})


def test_exemptions_from_the_checksum_database_are_cleared() -> None:
    env = binaries.checksum_env({"GONOSUMDB": "*", "GOPRIVATE": "*", "GOINSECURE": "*",
                                 "GOFLAGS": "-modcacherw"})
    assert env == {"GOSUMDB": "sum.golang.org", "GONOSUMDB": "", "GOPRIVATE": "",
                   "GOINSECURE": "", "GOFLAGS": "-modcacherw"}
